/**
 * What the product's CLI needs of the dev cluster (ADR 0015): `portal dev`'s
 * flags and the cheap checks that run before anything starts. runDev is
 * loaded separately (`loadRunDev`) so a usage error or a taken port is
 * reported before the second of module loading the API server costs.
 */
export { DEV_FLAGS, DEV_HELP, INSTALL_NAMESPACE, parseDevArgs, type DevOptions } from './dev/options.ts';
export { portProblem } from './dev/ports.ts';
export { lockStateDir, type LockResult } from './dev/state-lock.ts';
import type * as Dev from './dev/dev.ts';

export async function loadRunDev(): Promise<typeof Dev.runDev> {
  return (await import('./dev/dev.ts')).runDev;
}
