// An MQTT.js test harness driven through behaviour topics (mqttaudit.serve.behaviour): it connects with a
// persistent session, subscribes to mqttaudit/behaviour/<ClientId>, carries out each command with MQTT.js's own API,
// and leaves after IDLE seconds without a command. MQTT.js reconnects by itself when the broker drops it.
// Usage: node mqttjs_behaviour.js URL (4|5) CLIENT_ID IDLE_SECONDS
const mqtt = require("mqtt");
const [url, version, clientId, idle] = process.argv.slice(2);
const v5 = Number(version) === 5;
const client = mqtt.connect(url, {
  protocolVersion: Number(version),
  clientId,
  clean: false,
  reconnectPeriod: 200,
  properties: v5 ? { sessionExpiryInterval: 300 } : undefined,
});
const topic = `mqttaudit/behaviour/${clientId}`;
let timer = null;
// Reconnections do not restart the idle time: only commands do (a client the broker keeps refusing still leaves).
const leave = () => {
  client.end(false, {}, () => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref(); // an end that never completes (messages still queued)
};
const idleAgain = () => { clearTimeout(timer); timer = setTimeout(leave, Number(idle) * 1000); };
client.on("error", () => {}); // a refused packet or a dropped connection: MQTT.js reconnects; the broker judges
client.on("connect", () => client.subscribe(topic, { qos: 0 }));
idleAgain(); // from the start: a client that never gets a CONNACK it accepts leaves too
client.on("message", (_topic, payload) => {
  idleAgain();
  const words = payload.toString().split(" ");
  if (words[0] === "publish") {
    const [count, qos, where] = [Number(words[1]), Number(words[2]), words[3]];
    const retain = words[words.length - 1] === "retain";
    const size = words.length > 4 && words[4] !== "retain" ? Number(words[4]) : 8;
    for (let number = 0; number < count; number += 1) {
      client.publish(where, String(number).padStart(size, "0").slice(-size), { qos, retain });
    }
  } else if (words[0] === "reconnect") {
    client.end(false, {}, () => client.reconnect());
  } else if (words[0] === "disconnect") {
    leave();
  }
});
