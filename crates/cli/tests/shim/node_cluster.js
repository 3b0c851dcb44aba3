// Node.js http with cluster (2 workers), as Node services scale over cores, for
// crates/cli/tests/preload.rs: the primary forks two workers, which share port PORT (the
// primary accepts and hands each connection to a worker with SCM_RIGHTS, Node's default
// round-robin on Linux); each answers every request with 1 MiB of "x" and prints
// "worker PID served" on one line per request. Everything exits after SECONDS.
// usage: node node_cluster.js PORT SECONDS
const cluster = require('cluster');
const http = require('http');
const fs = require('fs');
const [port, seconds] = [Number(process.argv[2]), Number(process.argv[3])];
if (cluster.isPrimary) {
  let ready = 0;
  for (let i = 0; i < 2; i++) {
    cluster.fork().on('listening', () => {
      if (++ready === 2) fs.writeSync(1, 'serving\n');
    });
  }
  setTimeout(() => {
    for (const w of Object.values(cluster.workers)) w.kill();
    process.exit(0);
  }, seconds * 1000);
} else {
  const body = Buffer.alloc(1 << 20, 'x');
  http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': body.length });
    res.end(body);
    fs.writeSync(1, `worker ${process.pid} served\n`);
  }).listen(port, '0.0.0.0');
}
