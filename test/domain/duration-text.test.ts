/**
 * One way to write a duration per reader: settings (read back by
 * parseDurationText), bounds in error messages (the service and PostgreSQL's
 * submit() both), the API reference's table, and the console (exact and at
 * a glance).
 */
import { describe, expect, it } from "vitest";
import { formatDurationText, parseDurationText } from "../../src/domain/duration-text.js";
import { BOUNDS } from "../../src/domain/request-bounds.js";

const DAY = 86_400_000;

describe("formatDurationText", () => {
  it("writes settings in the largest whole unit below days, and reads them back", () => {
    for (const [ms, text] of [
      [0, "0s"],
      [1500, "1500ms"],
      [90_000, "90s"],
      [30 * 60_000, "30m"],
      [7 * DAY, "168h"],
      [30 * DAY, "720h"],
    ] as const) {
      expect(formatDurationText(ms)).toBe(text);
      expect(parseDurationText(text)).toBe(ms);
    }
  });

  it("writes a bound in days, hours, minutes or seconds, as the bad-input messages say it", () => {
    expect(formatDurationText(BOUNDS.leaseDurationMs[0], "bound")).toBe("1s");
    expect(formatDurationText(BOUNDS.leaseDurationMs[1], "bound")).toBe("12h");
    expect(formatDurationText(BOUNDS.waitMs[1], "bound")).toBe("1m");
    expect(formatDurationText(BOUNDS.retryBaseDelayMs[0], "bound")).toBe("0s");
    expect(formatDurationText(BOUNDS.snoozeDelayMs[1], "bound")).toBe("30d");
    expect(formatDurationText(BOUNDS.scheduleIntervalMs[1], "bound")).toBe("366d");
    expect(formatDurationText(90_000, "bound")).toBe("90s");
  });

  it("writes the reference's bounds without minutes, as a Duration's JSON counts seconds", () => {
    expect(formatDurationText(60_000, "reference")).toBe("60s");
    expect(formatDurationText(BOUNDS.ratePeriodMs[1], "reference")).toBe("1d");
    expect(formatDurationText(BOUNDS.leaseDurationMs[1], "reference")).toBe("12h");
    expect(formatDurationText(0, "reference")).toBe("0s");
    expect(formatDurationText(250, "reference")).toBe("250ms");
  });

  it("writes the console's exact durations with their units spelled out", () => {
    expect(formatDurationText(0, "spelled")).toBe("0 s");
    expect(formatDurationText(1000, "spelled")).toBe("1 s");
    expect(formatDurationText(90_000, "spelled")).toBe("90 s");
    expect(formatDurationText(60_000, "spelled")).toBe("1 min");
    expect(formatDurationText(7_200_000, "spelled")).toBe("2 h");
    expect(formatDurationText(DAY, "spelled")).toBe("24 h");
    expect(formatDurationText(1500, "spelled")).toBe("1.5 s");
  });

  it("writes the console's approximate durations in at most two units, rounded down", () => {
    expect(formatDurationText(0, "glance")).toBe("0 s");
    expect(formatDurationText(59_999, "glance")).toBe("59 s");
    expect(formatDurationText(95_000, "glance")).toBe("1 min 35 s");
    expect(formatDurationText(1_980_000, "glance")).toBe("33 min");
    expect(formatDurationText(7_500_000, "glance")).toBe("2 h 5 min");
    expect(formatDurationText(3 * DAY + 4 * 3_600_000 + 59 * 60_000, "glance")).toBe("3 d 4 h");
  });
});
