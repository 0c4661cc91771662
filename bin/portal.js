#!/usr/bin/env node
// Entry point for the `portal` executable. In a source checkout the CLI runs
// from TypeScript through tsx, so `npm start` needs no build step; an
// installed package or the container image ships compiled `dist/` instead.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { requireNode } from './require-node.js';

requireNode('portal');

// V8 keeps the code of every `new Function` source it compiled in its
// compilation cache, which garbage collection does not empty: each rule
// schema ajv compiles (and each compiled CEL rule) stayed there after the
// rule was gone, ~0.17 MiB per compile of a 200-property schema, linear in
// the rules ever compiled (issue 31: rule churn grew replicas by 1.2 GB).
// Portal compiles each source once per rule version, so the cache saves
// nothing; V8 reads the flag at each lookup, so setting it here covers every
// thread of the process.
setFlagsFromString('--no-compilation-cache');

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(source).href);
} else {
  await import('../dist/cli/main.js');
}
