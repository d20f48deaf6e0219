// Globals the official driver expects from Node, injected into every module by esbuild.
import { Buffer } from 'buffer';

const process = {
  browser: true,
  env: {},
  nextTick: (fn: (...a: unknown[]) => void, ...args: unknown[]) => queueMicrotask(() => fn(...args)),
};

export { Buffer, process };
