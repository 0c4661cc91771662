export * from './config.ts';
export * from './elector.ts';
export * from './events.ts';
export * from './term.ts';
export { LeaseEventRecorder, type LeaderEventRecorder } from './recorder.ts';
export { microTime, type LeaseRecord } from './lease-lock.ts';
