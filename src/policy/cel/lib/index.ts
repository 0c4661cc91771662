/** Every library Kubernetes adds to CEL, registered on one environment. */
import type { Environment } from '@marcbachmann/cel-js';
import { registerBase64 } from './base64.ts';
import { registerComprehensions } from './comprehensions.ts';
import { registerFormat } from './format.ts';
import { registerIP } from './ip.ts';
import { registerOptional } from './optional.ts';
import { registerQuantity } from './quantity.ts';
import { registerSemver } from './semver.ts';
import { registerURL } from './url.ts';
import { registerLists } from './lists.ts';
import { registerRegex } from './regex.ts';
import { registerSets } from './sets.ts';
import { registerStrings } from './strings.ts';

export function registerLibraries(env: Environment): void {
  registerRegex(env);
  registerOptional(env);
  registerStrings(env);
  registerLists(env);
  registerSets(env);
  registerBase64(env);
  registerURL(env);
  registerQuantity(env);
  registerIP(env);
  registerSemver(env);
  registerFormat(env);
  registerComprehensions(env);
}
