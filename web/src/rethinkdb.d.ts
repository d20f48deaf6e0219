// The official driver ships no typings; the console uses it dynamically.
declare module 'rethinkdb' {
  const r: any;
  export default r;
}
