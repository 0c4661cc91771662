/**
 * pino logger factory. One root logger per process, one child per component
 * (`logger.child({ component: 'admission' })`), keys from {@link LogKey}.
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { LogKey } from './log-keys.ts';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export interface LoggerOptions {
  level: LogLevel;
  /** Where lines go; the CLI passes stdout. Defaults to pino's stdout destination. */
  destination?: DestinationStream;
  /** Fields on every line (e.g. the pod name). */
  base?: Record<string, unknown>;
}

export type { Logger };

export function createLogger(opts: LoggerOptions): Logger {
  const options = {
    level: opts.level,
    base: opts.base ?? {},
    // Serialise errors under one key with their stack and cause chain.
    serializers: { [LogKey.error]: pino.stdSerializers.err },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger for one component. */
export function componentLogger(root: Logger, component: string): Logger {
  return root.child({ [LogKey.component]: component });
}

/** A logger that discards everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
