// Portal runs on Node 24 or newer (ADR 0008). On linux-x64 and linux-arm64
// `npm install` brings it (packages/node-runtime) and npm scripts run it from
// node_modules/.bin; elsewhere, macOS among them, the scripts run the `node`
// on PATH. This check is written for any Node that can parse it, so an older
// one stops here with one line that says what to install, instead of failing
// later on a syntax or API it lacks.
import { pathToFileURL } from 'node:url';

const REQUIRED_MAJOR = 24;

/**
 * Exits with code 1 and one line on stderr when this Node is older than 24.
 * @param {string} what the command being started, for the message
 */
export function requireNode(what) {
  const problem = nodeProblem(what, process.version, process.execPath);
  if (problem === undefined) return;
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

/**
 * The one-line error for a Node older than 24, or undefined when it will do.
 * @param {string} what the command being started
 * @param {string} version a Node version such as v20.20.2
 * @param {string} path where that Node is
 * @returns {string | undefined}
 */
export function nodeProblem(what, version, path) {
  const major = Number(/^v(\d+)/.exec(version)?.[1] ?? 0);
  if (major >= REQUIRED_MAJOR) return undefined;
  return (
    `${what}: needs Node.js ${REQUIRED_MAJOR} or newer, but this is ${version} (${path}); ` +
    `install Node ${REQUIRED_MAJOR} (https://nodejs.org, or e.g. \`brew install node@${REQUIRED_MAJOR}\`) and put it first on PATH ` +
    `(on linux-x64 and linux-arm64, \`npm install\` brings it and npm scripts use it)`
  );
}

// Run as a script (`node bin/require-node.js <what>`), the check guards an npm
// script before its first step (`npm test` lints before it runs any test).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) requireNode(process.argv.slice(2).join(' ') || 'portal');
