/**
 * Issue 10: fencing rests on public Node APIs only. Patching a Node internal
 * (it used to be `net.Socket#_writeGeneric`) ties the safety claim to one
 * runtime: under Node 24 the old hook's tests failed.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

test('nothing in src/ touches _writeGeneric, process.binding or internalBinding', () => {
  const offenders = sources(join(root, 'src')).flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((line, i) => ({ line, at: `${relative(root, file)}:${i + 1}` }))
      .filter(({ line }) => /_writeGeneric|process\.binding|internalBinding/.test(line))
      .map(({ at }) => at),
  );
  assert.deepEqual(offenders, []);
});
