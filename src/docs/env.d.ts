// esbuild bundles CSS imported from TypeScript into the page's one stylesheet.
declare module "*.css";
