/** A temporary directory for the tests of one file, and files written into it. */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before } from 'node:test';

export interface TempDir {
  /** The directory (made before the file's tests run). */
  readonly path: string;
  /** Writes `text` at `rel` below the directory (making its folders); returns the file's path. */
  write: (rel: string, text: string) => Promise<string>;
}

/** Made in a `before` hook of the calling file, removed in an `after` hook: call it at the top level, before the file's own hooks. */
export function tempDir(prefix: string): TempDir {
  let path = '';
  let made: Promise<string> | undefined;
  // A top-level hook may run at once, beside the file's own: write() waits for the directory.
  before(async () => {
    path = await (made = mkdtemp(join(tmpdir(), prefix)));
  });
  after(async () => {
    await rm(path, { recursive: true, force: true });
  });
  return {
    get path() {
      return path;
    },
    write: async (rel, text) => {
      if (!made) throw new Error(`tempDir(${prefix}): write before the directory's before hook ran`);
      const file = join(await made, rel);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text);
      return file;
    },
  };
}
