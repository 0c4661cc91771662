import { EXIT_FAILURE, type Command } from './command.ts';

// Placeholder until the command lands; owned by the issue that builds it.
export const serveCommand: Command = {
  run(_argv, io) {
    io.stderr.write('portal serve: not implemented yet\n');
    return Promise.resolve(EXIT_FAILURE);
  },
};
