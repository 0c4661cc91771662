import { EXIT_FAILURE, type Command } from './command.ts';

// Placeholder until the command lands; owned by the issue that builds it.
export const devCommand: Command = {
  run(_argv, io) {
    io.stderr.write('portal dev: not implemented yet\n');
    return Promise.resolve(EXIT_FAILURE);
  },
};
