#!/usr/bin/env node
// Entry point for the `portal` executable. In a source checkout the CLI runs
// from TypeScript through tsx, so `npm start` needs no build step; an
// installed package or the container image ships compiled `dist/` instead.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { requireNode } from './require-node.js';

requireNode('portal');

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(source).href);
} else {
  await import('../dist/cli/main.js');
}
