// Blocking sockets for the simulated board's blocking client. WebAssembly MicroPython runs on Node's main
// thread, which cannot block on a socket: a worker thread owns the sockets and hands received bytes over in
// a SharedArrayBuffer per connection, while the main thread waits with Atomics.wait (with a timeout).
// Main thread: syncNet(getMemory) -> the functions run.mjs adds to `jsnet`. This file is also the worker.
// Known limit: a program alternating reads between two blocking connections hung once for good inside
// Atomics.wait (Node 20, a timed wait that never returned); one connection per program has not.
import { Worker, isMainThread, parentPort } from "node:worker_threads";
import net from "node:net";

const CAP = 65536; // bytes one hand-over carries; what does not fit waits for the next read
// Header slots: STATE (IDLE, ASKED: the main thread waits for bytes, FILLED: LEN bytes are in the data
// area, LEN 0 meaning the connection closed), LEN, DEAD (the socket closed: writes fail), ERRNO (connect).
const STATE = 0, LEN = 1, DEAD = 2, ERRNO = 3;
const IDLE = 0, ASKED = 2, FILLED = 3, CONNECTED = 1;

function workerMain() {
  const conns = new Map();
  const fill = (c) => {
    if (!c.asked || (!c.chunks.length && !c.closed)) return;
    let n = 0;
    while (c.chunks.length && n < CAP) {
      let d = c.chunks[0];
      if (d.length > CAP - n) { c.chunks[0] = d.subarray(CAP - n); d = d.subarray(0, CAP - n); } else c.chunks.shift();
      c.data.set(d, n);
      n += d.length;
    }
    c.asked = false;
    c.hdr[LEN] = n;
    Atomics.store(c.hdr, STATE, FILLED);
    Atomics.notify(c.hdr, STATE);
  };
  parentPort.on("message", (m) => {
    if (m.op === "connect") {
      const hdr = new Int32Array(m.sab, 0, 4);
      const c = { hdr, data: new Uint8Array(m.sab, 16), chunks: [], closed: false, asked: false, up: false };
      c.s = net.connect(m.port, m.host);
      c.s.setNoDelay(true);
      conns.set(m.id, c);
      const done = (errno) => { hdr[ERRNO] = errno; Atomics.store(hdr, STATE, CONNECTED); Atomics.notify(hdr, STATE); };
      c.s.on("connect", () => { c.up = true; done(0); });
      c.s.on("data", (d) => { c.chunks.push(d); fill(c); });
      c.s.on("error", (e) => { if (!c.up && !c.closed) done(e.code === "ECONNREFUSED" ? 111 : 5); });
      c.s.on("close", () => { c.closed = true; Atomics.store(hdr, DEAD, 1); fill(c); });
    } else if (m.op === "cut") {
      for (const c of conns.values()) c.s.destroy();
    } else {
      const c = conns.get(m.id);
      if (!c) return;
      if (m.op === "read") { c.asked = true; fill(c); }
      else if (m.op === "write") c.s.write(m.data);
      else if (m.op === "close") { c.s.destroy(); conns.delete(m.id); }
    }
  });
}

export function syncNet(memory) {
  let worker = null, nextId = 1;
  const conns = new Map();
  const post = (m, transfer) => worker.postMessage(m, transfer);
  return {
    // -> a handle, or -errno (ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH while the network is down)
    sync_connect(host, port, timeoutMs, up) {
      if (!up) return -113;
      if (!worker) { worker = new Worker(new URL(import.meta.url)); worker.unref(); }
      const sab = new SharedArrayBuffer(16 + CAP);
      const hdr = new Int32Array(sab, 0, 4);
      const id = nextId++;
      post({ op: "connect", id, host, port, sab });
      Atomics.wait(hdr, STATE, IDLE, timeoutMs);
      if (Atomics.load(hdr, STATE) !== CONNECTED || hdr[ERRNO]) {
        post({ op: "close", id });
        return -(hdr[ERRNO] || 110);
      }
      hdr[STATE] = IDLE;
      conns.set(id, { hdr, data: new Uint8Array(sab, 16), left: null });
      return id;
    },
    // -> bytes copied to wasm memory at addr (at most max), 0 when none came within timeoutMs, -1 closed
    sync_readinto(id, addr, max, timeoutMs) {
      const c = conns.get(id);
      if (!c) return -1;
      if (!c.left) {
        if (Atomics.load(c.hdr, STATE) === IDLE) {
          Atomics.store(c.hdr, STATE, ASKED);
          post({ op: "read", id });
        }
        Atomics.wait(c.hdr, STATE, ASKED, Math.max(timeoutMs, 0));
        if (Atomics.load(c.hdr, STATE) !== FILLED) return 0;
        const n = c.hdr[LEN];
        c.left = n ? Buffer.from(c.data.subarray(0, n)) : null; // a copy: the area is refilled on the next ask
        Atomics.store(c.hdr, STATE, IDLE);
        if (!n) { conns.delete(id); return -1; }
      }
      const n = Math.min(max, c.left.length);
      new Uint8Array(memory().buffer, addr, n).set(c.left.subarray(0, n));
      c.left = n < c.left.length ? c.left.subarray(n) : null;
      return n;
    },
    sync_write(id, addr, n) {
      const c = conns.get(id);
      if (!c || Atomics.load(c.hdr, DEAD)) return false;
      const data = new Uint8Array(n);
      data.set(new Uint8Array(memory().buffer, addr, n)); // a copy: the Python buffer is reused
      post({ op: "write", id, data }, [data.buffer]);
      return true;
    },
    sync_close(id) {
      if (conns.delete(id) && worker) post({ op: "close", id });
    },
    cut() { if (worker) post({ op: "cut" }); }, // the network goes down: every socket is destroyed
  };
}

if (!isMainThread) workerMain();
