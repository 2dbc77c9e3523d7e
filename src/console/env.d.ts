// esbuild bundles CSS imported from TypeScript into the console's one stylesheet.
declare module "*.css";
