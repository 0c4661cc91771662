/**
 * The external programs some suites run (Alertmanager, promtool, unzip): found
 * on PATH (or at a fixed path) before a test uses one, so a machine without
 * it fails that test at once with the package to install, instead of waiting
 * on a process that never started. `.ci/run` installs all of them.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

export interface ExternalTool {
  /** The command, or an absolute path where the package installs it. */
  command: string;
  /** Where to get it, e.g. "Debian's prometheus-alertmanager". */
  install: string;
}

export const ALERTMANAGER: ExternalTool = { command: '/usr/bin/prometheus-alertmanager', install: "apt-get install prometheus-alertmanager (Debian's package)" };
export const PROMTOOL: ExternalTool = { command: 'promtool', install: "apt-get install prometheus (Debian's package brings promtool)" };
export const UNZIP: ExternalTool = { command: 'unzip', install: 'apt-get install unzip' };

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The tool's path; throws at once, naming what to install, when it is missing. */
export function requireTool(tool: ExternalTool): string {
  const candidates = isAbsolute(tool.command) ? [tool.command] : (process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, tool.command));
  const found = candidates.find(executable);
  if (found === undefined) throw new Error(`${tool.command} is not installed: ${tool.install}; .ci/run installs it`);
  return found;
}
