// Runs Python source (read from stdin) under the real MicroPython 1.27 WebAssembly port from npm.
// Copies repo files into MicroPython's in-memory filesystem under /repo (default: lib/, the codec's server half
// host/tinymqtt_cli/server_codec.py, tests/__init__.py, tests/shared/, tests/support/mptest.py; more with --copy REL), sets sys.path, runs the code with
// runPythonAsync (so top-level `await` works; this port has no asyncio.run) and exits 0, or 1 if Python raised.
//   node tests/support/mp_run.mjs [--root DIR] [--copy REL]... [--heapsize BYTES] < code.py
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";

const DEFAULT_COPIES = ["lib", "host/tinymqtt_cli/__init__.py", "host/tinymqtt_cli/server_codec.py", "tests/__init__.py",
                       "tests/shared", "tests/support/mptest.py"];
const MP_ROOT = "/repo";
const SYS_PATH = [`${MP_ROOT}/lib`, `${MP_ROOT}/host`, MP_ROOT, `${MP_ROOT}/tests/support`];

let root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
let heapsize;
const copies = [...DEFAULT_COPIES];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--root") root = path.resolve(argv[++i]);
  else if (a === "--copy") copies.push(argv[++i]);
  else if (a === "--heapsize") heapsize = parseInt(argv[++i], 10);
  else { console.error(`mp_run.mjs: unknown argument ${a}`); process.exit(2); }
}

// Output: collect bytes, write whole lines (and whatever is left at exit).
function sink(stream) {
  let buf = [];
  const flush = () => { if (buf.length) { stream.write(Buffer.from(buf)); buf = []; } };
  const put = (bytes) => { for (const c of bytes) { buf.push(c); if (c === 10) flush(); } };
  return { put, flush };
}
const out = sink(process.stdout), err = sink(process.stderr);
const finish = (code) => { out.flush(); err.flush(); process.exit(code); };

// Copy a host file or directory (recursively, skipping caches) into the MEMFS.
function copyIn(FS, rel) {
  const host = path.join(root, rel);
  if (!fs.existsSync(host)) return;
  const dest = path.posix.join(MP_ROOT, rel.split(path.sep).join("/"));
  if (fs.statSync(host).isDirectory()) {
    FS.mkdirTree(dest);
    for (const name of fs.readdirSync(host)) {
      if (name === "__pycache__" || name.endsWith(".pyc") || name.startsWith(".")) continue;
      copyIn(FS, path.join(rel, name));
    }
  } else {
    FS.mkdirTree(path.posix.dirname(dest));
    FS.writeFile(dest, fs.readFileSync(host));
  }
}

const code = fs.readFileSync(0, "utf8");
const opts = { stdout: out.put, stderr: err.put, linebuffer: false };
if (heapsize) opts.heapsize = heapsize;
const mp = await loadMicroPython(opts);
for (const rel of copies) copyIn(mp.FS, rel);
mp.runPython(`import sys, os\nsys.path[:0] = ${JSON.stringify(SYS_PATH)}\nos.chdir(${JSON.stringify(MP_ROOT)})\ndel sys, os`);

try {
  await mp.runPythonAsync(code);
  finish(0);
} catch (e) {
  if (e && e.name === "PythonError") {
    if (e.type === "SystemExit") {  // like CPython: no argument -> 0, int -> that code, else print and 1
      const arg = (/SystemExit:?(.*)\s*$/.exec(e.message) || ["", ""])[1].trim();
      if (/^-?\d+$/.test(arg) || arg === "") finish(Number(arg));
      process.stderr.write(arg + "\n"); finish(1);
    }
    err.flush(); process.stderr.write(e.message); finish(1);
  }
  err.flush(); console.error(e); finish(2);
}
