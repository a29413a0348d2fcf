// Runs a board's file tree under real MicroPython (WebAssembly, on Node) with a network: the `jsnet`
// module bridges to Node's TCP sockets, copying bytes straight into and out of wasm memory.
// Usage: node tools/sim/run.mjs ROOT [MAIN.py] [--heap BYTES]   (ROOT mirrors the board: /lib, main.py)
// Exit code 0 when the program finished, 1 when it raised. Tests may cut the network: SIGUSR1 toggles it.
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "fs";
import net from "net";
import path from "path";
import { syncNet } from "./syncnet.mjs";

const args = process.argv.slice(2);
const heapAt = args.indexOf("--heap");
const heapsize = heapAt >= 0 ? parseInt(args.splice(heapAt, 2)[1]) : 1024 * 1024;
const [root, main = "main.py"] = args;

let memory = null; // the wasm memory, caught at instantiation: the package does not export its views
const instantiate = WebAssembly.instantiate;
WebAssembly.instantiate = async (...a) => {
  const r = await instantiate(...a);
  const exports = (r.instance || r).exports;
  memory = Object.values(exports).find((x) => x instanceof WebAssembly.Memory);
  return r;
};
const mp = await loadMicroPython({
  heapsize,
  stdout: (s) => process.stdout.write(s + "\n"),
  stderr: (s) => process.stderr.write(s + "\n"),
});

let networkUp = true;
process.on("SIGUSR1", () => {
  networkUp = !networkUp;
  if (!networkUp) { for (const st of socks.values()) st.s.destroy(); sync.cut(); }
});
const sync = syncNet(() => memory); // blocking sockets (the blocking client), see syncnet.mjs
const socks = new Map();
let nextId = 1;
const wake = (st) => { if (st.waiter) { const w = st.waiter; st.waiter = null; w(); } };

mp.registerJsModule("jsnet", {
  network_up: () => networkUp,
  sync_connect: (host, port, timeoutMs) => sync.sync_connect(host, port, timeoutMs, networkUp),
  sync_readinto: sync.sync_readinto,
  sync_write: sync.sync_write,
  sync_close: sync.sync_close,
  connect(host, port) {
    return new Promise((resolve) => {
      if (!networkUp) return resolve(-113);
      const s = net.connect(port, host);
      const st = { s, chunks: [], waiter: null, closed: false };
      s.setNoDelay(true);
      s.on("connect", () => { const id = nextId++; socks.set(id, st); resolve(id); });
      s.on("data", (d) => { st.chunks.push(d); wake(st); });
      s.on("close", () => { st.closed = true; wake(st); });
      s.on("error", (e) => { if (!socks.has(nextId) && !st.closed) resolve(e.code === "ECONNREFUSED" ? -111 : -5); });
    });
  },
  readinto(id, addr, max) {
    const st = socks.get(id);
    if (!st) return Promise.resolve(0);
    const take = () => {
      if (!st.chunks.length) return 0;
      let d = st.chunks.shift();
      if (d.length > max) { st.chunks.unshift(d.subarray(max)); d = d.subarray(0, max); }
      new Uint8Array(memory.buffer, addr, d.length).set(d);
      return d.length;
    };
    if (st.chunks.length || st.closed) return Promise.resolve(take());
    return new Promise((resolve) => { st.waiter = () => resolve(take()); });
  },
  write(id, addr, n) {
    const st = socks.get(id);
    if (!st || st.closed) return false;
    st.s.write(Buffer.from(new Uint8Array(memory.buffer, addr, n))); // a copy: the Python buffer is reused
    return true;
  },
  close(id) {
    const st = socks.get(id);
    if (st) { st.s.destroy(); socks.delete(id); }
  },
});

function copyTree(src, dst) {
  mp.FS.mkdirTree(dst);
  for (const name of fs.readdirSync(src)) {
    const p = path.join(src, name);
    if (fs.statSync(p).isDirectory()) copyTree(p, dst + "/" + name);
    else mp.FS.writeFile(dst + "/" + name, fs.readFileSync(p));
  }
}
copyTree(root, "/board");
mp.FS.chdir("/board");

// asyncio.run() does not exist in the WebAssembly build (JS drives its loop): this one schedules the
// task, and the launcher awaits it after main.py returns, so board code runs unchanged.
const PRELUDE = `import sys, asyncio
sys.path[:0] = ['/board', '/board/lib']
_sim_tasks = []
asyncio.run = lambda coro: _sim_tasks.append(asyncio.create_task(coro))
`;
let code = 0;
try {
  await mp.runPythonAsync(PRELUDE); // run apart, so a traceback's line numbers are main.py's own
  await mp.runPythonAsync(fs.readFileSync(path.join(root, main), "utf8"));
  await mp.runPythonAsync("for _t in _sim_tasks:\n    await _t\n");
} catch (e) {
  process.stderr.write((e.type ? e.message : String(e)) + "\n");
  code = 1;
}
for (const st of socks.values()) st.s.destroy();
process.exit(code);
