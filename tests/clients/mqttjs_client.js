// MQTT.js as a client of mqttaudit serve: connects (protocol version from argv), subscribes to TOPIC/#, publishes
// one message at QoS 0, 1 and 2 to TOPIC/q0..q2, waits for the three to come back, and ends cleanly.
// Usage: node mqttjs_client.js URL PROTOCOL_VERSION(4|5) TOPIC
const mqtt = require("mqtt");
const [url, version, topic] = process.argv.slice(2);
const client = mqtt.connect(url, { protocolVersion: Number(version), clientId: `mqttjs-${version}`, reconnectPeriod: 0 });
const got = [];
const fail = (why) => { console.error(why); process.exit(1); };
const timer = setTimeout(() => fail(`timed out with ${got.length} messages`), 10000);
client.on("error", (error) => fail(`error: ${error.message}`));
client.on("message", (received) => {
  got.push(received);
  if (got.length === 3) {
    clearTimeout(timer);
    client.end(false, {}, () => { console.log(got.sort().join(",")); process.exit(0); });
  }
});
client.on("connect", () => {
  client.subscribe(`${topic}/#`, { qos: 2 }, (error) => {
    if (error) fail(`subscribe: ${error.message}`);
    for (const qos of [0, 1, 2]) client.publish(`${topic}/q${qos}`, `m${qos}`, { qos });
  });
});
