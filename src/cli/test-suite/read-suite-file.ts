/**
 * Reads one suite file as text through the one bounded reader of user files
 * (config/read-file.ts): a FIFO, socket or device named `*.portal-test.yaml`
 * is refused instead of blocking the run, a file swapped after it was listed
 * is checked again on its open descriptor, and never more than the limit is
 * read.
 */
import { readBoundedFile } from '../../config/read-file.ts';

/**
 * Largest suite file. YAML parsing costs ~100x the text in memory (see
 * MAX_MANIFEST_BYTES), so 1 MiB stays near 100 MB; the shipped Pod Security
 * suite, which names every verdict of 19 rules on ~170 fixtures, is ~70 KB.
 */
export const MAX_SUITE_BYTES = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

export type ReadResult = { ok: true; text: string } | { ok: false; message: string };

export async function readSuiteFile(path: string): Promise<ReadResult> {
  const read = await readBoundedFile(path, { maxBytes: MAX_SUITE_BYTES, what: 'suite' });
  if (!read.ok) return read;
  if (read.bytes.includes(0)) return { ok: false, message: 'is a binary file (it contains NUL bytes), not YAML' };
  try {
    return { ok: true, text: utf8.decode(read.bytes) };
  } catch {
    return { ok: false, message: 'is not UTF-8 text, so not YAML' };
  }
}
