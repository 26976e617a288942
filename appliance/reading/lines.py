"""Line geometry the reading order and the Markdown share: rows, print heights."""

from __future__ import annotations

import statistics

from appliance.engines.base import Line

HEADING_RATIO = 1.3  # a heading's print is at least this much taller than the body's


def rows(lines: list[Line], height: float | None = None) -> list[list[Line]]:
    """Lines grouped into rows, top to bottom, each row left to right.

    A line joins the current row when its vertical centre is within half a line
    height of the row's mean centre. The mean, not the union of the row's boxes: a
    union grows with every line it takes and swallows the next row on a page that
    leans a little.
    """
    if not lines:
        return []
    height = height or median_height(lines)
    result: list[list[Line]] = []
    centres: list[float] = []
    for line in sorted(lines, key=lambda item: (centre(item), item.box[0])):
        if result and abs(centre(line) - statistics.fmean(centres)) <= height / 2:
            result[-1].append(line)
            centres.append(centre(line))
        else:
            result.append([line])
            centres = [centre(line)]
    return [sorted(row, key=lambda item: item.box[0]) for row in result]


def centre(line: Line) -> float:
    return (line.box[1] + line.box[3]) / 2


def median_height(lines: list[Line]) -> float:
    return statistics.median(line_height(line) for line in lines)


def line_height(line: Line) -> float:
    return line.box[3] - line.box[1]
