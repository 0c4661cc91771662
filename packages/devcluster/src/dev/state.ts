/**
 * `.portal/dev/state.json`, the contract other tools read (docs/design.md §6):
 * `{kubeconfig, apiserver, replicas: [{name, pid, webhook, probes}]}`.
 * Written atomically (temp file + rename) so a reader never sees half a file.
 */
import { rename, rm, writeFile } from 'node:fs/promises';

export interface DevState {
  kubeconfig: string;
  apiserver: string;
  replicas: { name: string; pid: number | null; webhook: string; probes: string }[];
}

let seq = 0;

export async function writeState(file: string, state: DevState): Promise<void> {
  const tmp = `${file}.${seq++}.tmp`;
  await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`);
  await rename(tmp, file);
}

export async function removeState(file: string): Promise<void> {
  await rm(file, { force: true });
}
