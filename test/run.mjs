// Runs every *.test.ts under test/ with node:test through tsx. Node 20's
// `--test` does not expand globs itself, so the files are found here.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const filter = process.argv.slice(2);
const files = [];
(function walk(dir) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (entry.endsWith('.test.ts')) files.push(relative(root, path));
  }
})(join(root, 'test'));
files.sort();
const selected = filter.length ? files.filter((f) => filter.some((p) => f.includes(p))) : files;
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...selected], {
  cwd: root,
  stdio: 'inherit',
});
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
