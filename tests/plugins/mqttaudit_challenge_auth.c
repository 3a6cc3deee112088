/* SPDX-License-Identifier: Apache-2.0
 *
 * A mosquitto 2.0 plugin (plugin API version 5) that gives the broker one MQTT 5.0 enhanced authentication method
 * (section 4.12), so that the probe can exercise the AUTH exchange against a real broker:
 *
 *   method "mqttaudit-challenge", one round of challenge and response:
 *     CONNECT (or AUTH 0x19)  Authentication Data "client-first"
 *     AUTH 0x18               Authentication Data "mqttaudit-nonce" (the challenge)
 *     AUTH 0x18               Authentication Data "ecnon-tiduattqm" (the challenge reversed)
 *     CONNACK 0x00 (or AUTH 0x00 after a re-authentication)
 *
 * Any other data at either step is refused (MOSQ_ERR_AUTH: CONNACK 0x87). Other methods are left to the broker
 * (CONNACK 0x8C). The plugin keeps no state: the challenge is fixed, which is enough for a probe whose broker
 * profile scripts the answers (hex of "client-first", then hex of "ecnon-tiduattqm").
 *
 * Built by the tests: gcc -shared -fPIC -o mqttaudit_challenge_auth.so mqttaudit_challenge_auth.c
 * (headers from Debian's mosquitto-dev), loaded with "plugin /path/mqttaudit_challenge_auth.so".
 */

#include <stdlib.h>
#include <string.h>

#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

/* From mosquitto.h (libmosquitto-dev, which the broker headers do not need otherwise). */
#define CHALLENGE_ERR_AUTH_CONTINUE (-4)
#define CHALLENGE_ERR_SUCCESS 0
#define CHALLENGE_ERR_AUTH 11
#define CHALLENGE_ERR_PLUGIN_DEFER 17

#define METHOD "mqttaudit-challenge"
#define CLIENT_FIRST "client-first"
#define CHALLENGE "mqttaudit-nonce"
#define RESPONSE "ecnon-tiduattqm"

static mosquitto_plugin_id_t *plugin_id;

static int data_is(const struct mosquitto_evt_extended_auth *ed, const char *expected)
{
	size_t length = strlen(expected);
	return ed->data_in != NULL && ed->data_in_len == length && memcmp(ed->data_in, expected, length) == 0;
}

static int on_start(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_extended_auth *ed = event_data;
	size_t length = strlen(CHALLENGE);
	(void)event;
	(void)userdata;

	if(ed->auth_method == NULL || strcmp(ed->auth_method, METHOD) != 0){
		return CHALLENGE_ERR_PLUGIN_DEFER;
	}
	if(!data_is(ed, CLIENT_FIRST)){
		return CHALLENGE_ERR_AUTH;
	}
	/* The broker frees the data with free() once the AUTH is sent. */
	ed->data_out = malloc(length);
	if(ed->data_out == NULL){
		return CHALLENGE_ERR_AUTH;
	}
	memcpy(ed->data_out, CHALLENGE, length);
	ed->data_out_len = (uint16_t)length;
	return CHALLENGE_ERR_AUTH_CONTINUE;
}

static int on_continue(int event, void *event_data, void *userdata)
{
	struct mosquitto_evt_extended_auth *ed = event_data;
	(void)event;
	(void)userdata;

	/* mosquitto 2.0.11 leaves auth_method NULL in this event; the exchange it continues began with METHOD, the
	 * only one on_start takes up (the broker refuses an AUTH naming another method itself). */
	if(ed->auth_method != NULL && strcmp(ed->auth_method, METHOD) != 0){
		return CHALLENGE_ERR_PLUGIN_DEFER;
	}
	return data_is(ed, RESPONSE) ? CHALLENGE_ERR_SUCCESS : CHALLENGE_ERR_AUTH;
}

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	int i;
	for(i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5){
			return 5;
		}
	}
	return -1;
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata, struct mosquitto_opt *options,
		int option_count)
{
	int rc;
	(void)userdata;
	(void)options;
	(void)option_count;

	plugin_id = identifier;
	rc = mosquitto_callback_register(plugin_id, MOSQ_EVT_EXT_AUTH_START, on_start, NULL, NULL);
	if(rc != CHALLENGE_ERR_SUCCESS){
		return rc;
	}
	return mosquitto_callback_register(plugin_id, MOSQ_EVT_EXT_AUTH_CONTINUE, on_continue, NULL, NULL);
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	(void)userdata;
	(void)options;
	(void)option_count;

	mosquitto_callback_unregister(plugin_id, MOSQ_EVT_EXT_AUTH_START, on_start, NULL);
	return mosquitto_callback_unregister(plugin_id, MOSQ_EVT_EXT_AUTH_CONTINUE, on_continue, NULL);
}
