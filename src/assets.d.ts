// Files embedded by Bun (`with { type: 'file' | 'text' }`): a path, or the text.
declare module '*.sql' {
  const text: string;
  export default text;
}
declare module '*.wasm' {
  const path: string;
  export default path;
}
declare module '*.data' {
  const path: string;
  export default path;
}
declare module '*.css' {
  const path: string;
  export default path;
}
declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  const path: string;
  export default path;
}
