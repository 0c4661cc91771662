// Hostile files for `portal test` and `portal serve --policies` (issue 16,
// item 5). Measured before: a YAML alias bomb ended `portal test` with exit 1
// and a stack trace, a symlink to /dev/zero in a policy directory grew the
// process without bound (17-22 GB), and a FIFO hung the run forever.
//
// Each case runs the real `portal` executable (bin/portal.js) as a child
// process and must end, on its own, with exit 2 and a message naming the
// file: as a rule file (`--policies`), as a manifest (a FILE argument), and
// as a policy directory `portal serve` is started on (which must refuse to
// start). A run that hangs is killed by the runner's deadline and fails the
// test, so the test always finishes.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runPortal, type RunResult } from '../cli-test/run-portal.ts';
import { TEAM_RULE } from '../support/team-rule.ts';

/** Under load a run takes 10-20 s (most of it tsx compiling the CLI); a hang is what takes longer. */
const DEADLINE_MS = 120_000;

let dir: string;
const at = (...p: string[]): string => join(dir, ...p);
const sockets: Server[] = [];

const POD = 'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default, labels: {team: a}}\nspec: {containers: [{name: app, image: "nginx:1.27"}]}\n';

/** The billion laughs: nine aliases, nine levels deep (9^9 strings once expanded). */
function aliasBomb(): string {
  let text = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n';
  let previous = 'a';
  for (const name of 'bcdefghi') {
    text += `  ${name}: &${name} [${Array.from({ length: 9 }, () => `*${previous}`).join(',')}]\n`;
    previous = name;
  }
  return text;
}

interface Case {
  name: string;
  /** Makes the hostile file at `path`. */
  make: (path: string) => void | Promise<void>;
  /** What the message says after the file name, as a rule file / as a manifest. */
  asRule: RegExp;
  asManifest: RegExp;
}

const notRegular = (what: string): RegExp => new RegExp(`${what}; only regular files are read`);

const CASES: Case[] = [
  {
    name: 'a FIFO nobody writes to',
    make: (path) => execFileSync('mkfifo', [path]),
    asRule: notRegular('is a FIFO \\(named pipe\\)'),
    asManifest: notRegular('is a FIFO \\(named pipe\\)'),
  },
  {
    name: 'a symlink to /dev/zero',
    make: (path) => symlinkSync('/dev/zero', path),
    asRule: notRegular('is a symlink to /dev/zero, a character device'),
    asManifest: notRegular('is a symlink to /dev/zero, a character device'),
  },
  {
    name: 'a Unix socket',
    make: async (path) => {
      const server = createServer();
      sockets.push(server);
      await new Promise<void>((resolve) => server.listen(path, resolve));
    },
    asRule: notRegular('is a socket'),
    asManifest: notRegular('is a socket'),
  },
  {
    name: 'a YAML alias bomb',
    make: (path) => writeFileSync(path, aliasBomb()),
    asRule: /YAML aliases expand past 100 copies \(an alias bomb\?\)/,
    asManifest: /YAML aliases expand past 100 copies \(an alias bomb\?\)/,
  },
  {
    // 5,000 nested flow sequences in 10 KB aborted Node outright (V8 fatal
    // error near the stack limit) before nesting was bounded.
    name: 'flow sequences nested 5,000 deep',
    make: (path) => writeFileSync(path, `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: {a: ${'['.repeat(5000)}${']'.repeat(5000)}}\n`),
    asRule: /nested deeper than 200 levels at line 4/,
    asManifest: /nested deeper than 200 levels at line 4/,
  },
  {
    // Sparse: 17 MiB of size, no disk used. Over both caps (1 MiB for a rule
    // file, 16 MiB for a manifest), refused from its size before reading.
    name: 'an oversize file',
    make: (path) => {
      writeFileSync(path, '');
      truncateSync(path, 17 * 1024 * 1024);
    },
    asRule: /file is 17\.0 MiB, over the 1\.0 MiB limit for a rule file/,
    asManifest: /file is 17\.0 MiB, over the 16\.0 MiB limit for a manifest/,
  },
];

const slug = (c: Case): string => c.name.replace(/[^a-z0-9]+/gi, '-').toLowerCase();

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'portal-hostile-files-'));
  mkdirSync(at('good'));
  writeFileSync(at('good', 'rule.yaml'), TEAM_RULE);
  writeFileSync(at('pod.yaml'), POD);
  mkdirSync(at('manifests'));
  for (const c of CASES) {
    // A policy directory with one good rule and the hostile file beside it.
    mkdirSync(at(slug(c)));
    writeFileSync(at(slug(c), 'rule.yaml'), TEAM_RULE.replace('require-team', `require-team-${slug(c)}`));
    await c.make(at(slug(c), 'hostile.yaml'));
    await c.make(at('manifests', `${slug(c)}.yaml`));
  }
});

after(() => {
  for (const s of sockets) s.close();
  rmSync(dir, { recursive: true, force: true });
});

function portal(args: string[]): Promise<RunResult> {
  // Each run gets its own deadline: a hang fails this test instead of stalling the suite.
  return runPortal(args, { cwd: dir, env: { POD_NAME: 'portal-hostile' }, timeoutMs: DEADLINE_MS });
}

/** Exit 2, every expected message, no stack trace, nothing on stdout (nothing was evaluated or served). */
function assertRefused(r: RunResult, ...expected: RegExp[]): void {
  const context = `exit ${r.code}\nstderr:\n${r.stderr}\nstdout:\n${r.stdout.slice(0, 2000)}`;
  assert.equal(r.code, 2, context);
  for (const re of expected) assert.match(r.stderr, re, context);
  assert.doesNotMatch(r.stderr, /\n\s+at .+:\d+:\d+\)?\n/, `stack trace shown:\n${context}`);
}

const escaped = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** "FILE: message" as the CLI prints a problem. */
const named = (file: string, message: RegExp): RegExp => new RegExp(`${escaped(file)}: ${message.source}`);

describe('hostile files: portal test --policies DIR (as rule files)', { concurrency: 2, timeout: 10 * DEADLINE_MS }, () => {
  for (const c of CASES) {
    it(`${c.name}: exit 2, the file named`, async () => {
      const r = await portal(['test', '--policies', slug(c), 'pod.yaml']);
      assertRefused(r, named(`${slug(c)}/hostile.yaml`, c.asRule), /Nothing was evaluated/);
      assert.equal(r.stdout, '');
    });
  }
});

describe('hostile files: portal test FILE (as manifests)', { timeout: 2 * DEADLINE_MS }, () => {
  it('every case at once: exit 2, each file named with what is wrong with it', async () => {
    const files = CASES.map((c) => `manifests/${slug(c)}.yaml`);
    const r = await portal(['test', '--policies', 'good', ...files]);
    assertRefused(r, ...CASES.map((c) => named(`manifests/${slug(c)}.yaml`, c.asManifest)));
    assert.equal(r.stdout, '');
  });

  it('the same through a directory of manifests', async () => {
    const r = await portal(['test', '--policies', 'good', 'manifests']);
    assertRefused(r, ...CASES.map((c) => named(join('manifests', `${slug(c)}.yaml`), c.asManifest)));
  });
});

describe('hostile files: portal serve --policies DIR refuses to start', { concurrency: 2, timeout: 10 * DEADLINE_MS }, () => {
  for (const c of CASES) {
    it(`${c.name}: exit 2, the file named, nothing listening`, async () => {
      const r = await portal(['serve', '--policies', slug(c), '--self-signed', '--webhook-port', '0', '--probes-port', '0', '--bind-address', '127.0.0.1']);
      assertRefused(r, /portal serve: invalid rules:/, named(at(slug(c), 'hostile.yaml'), c.asRule));
      // A replica that listened would have logged (stdout is its JSON log).
      assert.equal(r.stdout, '');
    });
  }

  it('a --config that is a FIFO is refused the same way', async () => {
    const r = await portal(['serve', '--policies', 'good', '--self-signed', '--webhook-port', '0', '--probes-port', '0', '--config', `manifests/${slug(CASES[0]!)}.yaml`]);
    assertRefused(r, /--config .*\.yaml: is a FIFO \(named pipe\); only regular files are read/);
  });
});

/**
 * Issue 31 item 7: `portal test` is linear and bounded across files. A 16 MiB
 * map of 1.4M keys took hours (yaml's duplicate-key check compared every
 * pair) and three 12 MB files of Pods used 2.2 GB; one budget for all inputs
 * of a run refuses them, naming the file that crossed it. The runs get a
 * 1 GiB heap: a run that needed more would crash (and fail the test) instead
 * of being refused.
 */
describe('hostile files: the input budget of a portal test run', { timeout: 20 * DEADLINE_MS }, () => {
  const bounded = (args: string[]): Promise<RunResult> =>
    runPortal(args, { cwd: dir, env: { POD_NAME: 'portal-hostile', NODE_OPTIONS: '--max-old-space-size=1024' }, timeoutMs: 5 * DEADLINE_MS, peakRss: true });

  it('a map of 1.4M keys (12 MB): exit 2, the file and the key budget named, a small peak RSS', async () => {
    let text = '';
    for (let i = 0; i < 1_400_000; i++) text += `k${i.toString(36)}: 0\n`;
    writeFileSync(at('keys.yaml'), text);
    const r = await bounded(['test', '--policies', 'good', 'keys.yaml']);
    assertRefused(r, /keys\.yaml: holds more than 1,000,000 map keys \(after 0 in the files before it\), over what all inputs of one run may hold together \(64\.0 MiB, 100,000 documents, 1,000,000 map keys\)/);
    // Refused by the count of plain lines before yaml's lexer builds anything (measured: 148 MB, the CLI itself ~100 MB).
    assert.ok(r.peakRssBytes !== undefined && r.peakRssBytes <= 512 * 1024 * 1024, `peak RSS ${Math.round((r.peakRssBytes ?? NaN) / 1048576)} MiB`);
  });

  it('three 12 MB files of Pods: exit 2 naming the second, the third not read', async () => {
    const pods = (f: string): string => {
      const out: string[] = [];
      for (let i = 0, size = 0; size < 12_000_000; i++) {
        const doc = `apiVersion: v1\nkind: Pod\nmetadata:\n  name: p${f}${i}\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: nginx:1.25\n---\n`;
        out.push(doc);
        size += doc.length;
      }
      return out.join('');
    };
    for (const f of ['a', 'b', 'c']) writeFileSync(at(`pods-${f}.yaml`), pods(f));
    const r = await bounded(['test', '--policies', 'good', 'pods-a.yaml', 'pods-b.yaml', 'pods-c.yaml']);
    assertRefused(r, /pods-b\.yaml: holds more than [\d,]+ (map keys|YAML documents) \(after [\d,]+ in the files before it\), over what all inputs of one run may hold together/);
    assert.doesNotMatch(r.stderr, /pods-(a|c)\.yaml:/);
  });
});
