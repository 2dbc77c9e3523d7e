/** Small hooks shared by the views: loading data, throttling, live signals. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { describeError, isAbort, type ApiProblem } from "./api.js";
import { liveFeed, type LiveSignal, type LiveStatus } from "./live.js";

export interface Resource<T> {
  data?: T;
  /** The last load failed (data, if any, is from an earlier load). */
  error?: ApiProblem;
  loading: boolean;
  /** Loads again, keeping the current data on screen; calls made while a load runs collapse into one. */
  reload: () => void;
}

/**
 * Runs `load` when `deps` change (dropping the previous data) and on
 * `reload()`. Loads never overlap; a stale answer is never shown.
 */
export function useResource<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): Resource<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiProblem; loading: boolean }>({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const ctl = useRef({ generation: 0, inFlight: false, again: false, abort: undefined as AbortController | undefined });

  const run = useCallback((): void => {
    const c = ctl.current;
    if (c.inFlight) {
      c.again = true;
      return;
    }
    c.inFlight = true;
    const generation = c.generation;
    const abort = new AbortController();
    c.abort = abort;
    loadRef
      .current(abort.signal)
      .then(
        (data) => {
          if (generation === c.generation) setState({ data, loading: false });
        },
        (err: unknown) => {
          if (generation !== c.generation || isAbort(err)) return;
          setState((s) => ({ data: s.data, error: describeError(err), loading: false }));
        },
      )
      .finally(() => {
        if (generation !== c.generation) return;
        c.inFlight = false;
        if (c.again) {
          c.again = false;
          run();
        }
      });
  }, []);

  // The data belongs to the deps it was loaded for. The render right after
  // the deps change (before the effect below runs) must not show the old
  // data under the new filter.
  const depsKey = JSON.stringify(deps);
  const loadedFor = useRef(depsKey);

  useEffect(() => {
    const c = ctl.current;
    c.generation++;
    c.inFlight = false;
    c.again = false;
    loadedFor.current = depsKey;
    setState({ loading: true });
    run();
    return () => {
      c.generation++;
      c.abort?.abort();
    };
    // The effect reruns when the caller's deps change, as useEffect's own deps would.
  }, deps);

  if (loadedFor.current !== depsKey) return { loading: true, reload: run };
  return { ...state, reload: run };
}

/** Calls `fn` at most once per `ms`: at once when idle, else once at the end of the window. */
export function useThrottled(fn: () => void, ms: number): () => void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const ctl = useRef({ last: 0, timer: undefined as ReturnType<typeof setTimeout> | undefined });
  useEffect(() => () => clearTimeout(ctl.current.timer), []);
  return useCallback(() => {
    const c = ctl.current;
    if (c.timer !== undefined) return;
    const wait = c.last + ms - Date.now();
    const fire = (): void => {
      c.timer = undefined;
      c.last = Date.now();
      fnRef.current();
    };
    if (wait <= 0) fire();
    else c.timer = setTimeout(fire, wait);
  }, [ms]);
}

/** Calls `onSignal` for every live event and resync while the component is mounted. */
export function useLive(onSignal: (signal: LiveSignal) => void): void {
  const ref = useRef(onSignal);
  ref.current = onSignal;
  useEffect(() => liveFeed.subscribe((signal) => ref.current(signal)), []);
}

export function useLiveStatus(): LiveStatus {
  const [status, setStatus] = useState(liveFeed.status);
  useEffect(() => {
    setStatus(liveFeed.status);
    return liveFeed.onStatus(setStatus);
  }, []);
  return status;
}
