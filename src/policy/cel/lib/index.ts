/** Every library Kubernetes adds to CEL, registered on one environment. */
import type { Environment } from '@marcbachmann/cel-js';
import { registerBase64 } from './base64.ts';
import { registerLists } from './lists.ts';
import { registerRegex } from './regex.ts';
import { registerSets } from './sets.ts';
import { registerStrings } from './strings.ts';

export function registerLibraries(env: Environment): void {
  registerRegex(env);
  registerStrings(env);
  registerLists(env);
  registerSets(env);
  registerBase64(env);
}
