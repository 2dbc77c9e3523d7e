/**
 * The given messages as a request stream (an AsyncIterable), for client-streaming
 * and bidi calls that send everything at once.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- an async generator is how Connect takes a request stream; there is nothing to await
export async function* streamOf<T>(...messages: T[]): AsyncGenerator<T> {
  yield* messages;
}
