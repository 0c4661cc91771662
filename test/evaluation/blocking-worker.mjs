// A piscina task handler for test/evaluation/threads.test.ts: blocks until the
// test releases the gate (shared memory), then answers the task's number.
export default function ({ n, gate }) {
  Atomics.wait(new Int32Array(gate), 0, 0);
  return n;
}
