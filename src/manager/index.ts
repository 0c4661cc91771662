export * from './manager.ts';
export * from './runnable.ts';
