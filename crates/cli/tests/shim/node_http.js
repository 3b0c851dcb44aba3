// A Node.js http server (libuv over epoll) for crates/cli/tests/preload.rs: answers every
// request with 1 MiB of "x"; exits 0 after SECONDS.
// usage: node node_http.js PORT SECONDS
const http = require('http');
const body = Buffer.alloc(1 << 20, 'x');
const srv = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Length': body.length });
  res.end(body);
});
srv.listen(Number(process.argv[2]), '0.0.0.0', () => console.log('serving'));
setTimeout(() => { srv.close(); process.exit(0); }, Number(process.argv[3]) * 1000);
