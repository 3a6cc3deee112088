'use strict'
// Runs an aedes MQTT broker on `node aedes_server.js HOST PORT` until SIGTERM or SIGINT.
// aedes is found through NODE_PATH; it is an ES module since 1.0, hence the dynamic import.
const net = require('node:net')
const { pathToFileURL } = require('node:url')

async function main () {
  const [host, port] = process.argv.slice(2)
  const { Aedes } = await import(pathToFileURL(require.resolve('aedes')).href)
  const broker = await Aedes.createBroker()
  const server = net.createServer(broker.handle)
  server.on('error', (err) => {
    console.error(`aedes: ${err.message}`)
    process.exit(1)
  })
  server.listen(Number(port), host, () => {
    console.log(`aedes ${broker.version} listening on ${host}:${port}`)
  })
  // Closing the broker first disconnects its clients, so that server.close() does not wait for them.
  const stop = () => broker.close(() => server.close(() => process.exit(0)))
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
