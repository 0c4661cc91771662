/**
 * Finds the suites to run from the command line's FILE|DIR arguments: a file
 * is a suite whatever its name; a directory is searched recursively for
 * `*.portal-test.yaml` (and `.yml`).
 *
 * Bounded on hostile trees: symbolic links to directories are not followed
 * (a link loop cannot make the walk endless, as when Portal reads policy
 * directories), hidden directories and node_modules are not entered, and the
 * walk stops with an error after MAX_ENTRIES directory entries.
 */
import { opendir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { SUITE_FILE } from './format.ts';

/**
 * Directory entries one run may look at. A large monorepo has ~10^5 files
 * outside node_modules; a run that would see more is almost certainly pointed
 * at the wrong directory (`/`, a home directory), and is stopped in well under
 * a second instead of walking the disk.
 */
export const MAX_ENTRIES = 200_000;

/** Directories never entered: version control and tool state, and dependencies. */
function skipped(name: string): boolean {
  return name.startsWith('.') || name === 'node_modules';
}

export interface Discovery {
  /** Suite files in argument order, each directory's in path order, without duplicates. */
  files: string[];
  /** `path: message` for arguments that cannot be read or hold no suite. */
  problems: string[];
}

export async function discoverSuites(args: readonly string[], maxEntries = MAX_ENTRIES): Promise<Discovery> {
  const files: string[] = [];
  const seen = new Set<string>();
  const problems: string[] = [];
  const budget = { left: maxEntries, max: maxEntries };
  for (const arg of args) {
    let isDir: boolean;
    try {
      isDir = (await stat(arg)).isDirectory();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      problems.push(`${arg}: cannot read: ${code === 'ENOENT' ? 'no such file or directory' : code === 'ELOOP' ? 'too many levels of symbolic links' : (e as Error).message}`);
      continue;
    }
    if (!isDir) {
      if (!seen.has(arg)) files.push(arg);
      seen.add(arg);
      continue;
    }
    const found: string[] = [];
    const error = await walk(arg, found, budget);
    if (error) {
      problems.push(error);
      continue;
    }
    if (found.length === 0) {
      problems.push(`${arg}: holds no *.portal-test.yaml suite (hidden directories, node_modules and symbolic links to directories are not searched); to evaluate manifests against rules, use 'portal test --policies DIR FILE...'`);
    }
    for (const f of found) {
      if (!seen.has(f)) files.push(f);
      seen.add(f);
    }
  }
  return { files, problems };
}

/** Breadth-first, entries sorted within each directory, so the order does not depend on the file system. */
async function walk(root: string, out: string[], budget: { left: number; max: number }): Promise<string | undefined> {
  const queue = [root];
  const found: string[] = [];
  while (queue.length > 0) {
    const dir = queue.shift() as string;
    const names: { name: string; dir: boolean; file: boolean }[] = [];
    try {
      const handle = await opendir(dir);
      for await (const entry of handle) {
        if (--budget.left < 0) {
          return `${root}: more than ${budget.max.toLocaleString('en-US')} directory entries searched for suites; name the directories that hold them`;
        }
        // Anything else named like a suite is read (and refused if it is not a regular file: a FIFO, a
        // link loop); a symbolic link to a directory is not followed.
        names.push({ name: entry.name, dir: entry.isDirectory(), file: !entry.isDirectory() });
      }
    } catch (e) {
      // Not skipped: a suite that silently goes unrun would let CI pass.
      return `${dir}: cannot read: ${(e as Error).message}`;
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const n of names) {
      const path = join(dir, n.name);
      if (n.dir) {
        if (!skipped(n.name)) queue.push(path);
      } else if (n.file && SUITE_FILE.test(n.name)) found.push(path);
    }
  }
  found.sort();
  out.push(...found);
  return undefined;
}
