package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"
	"unicode"
)

// The plot of -png: one line per row of the summary, the cost ratio on a
// linear axis from 0, a bar from the lowest to the highest ratio over the
// runs, a dot at their median, a red tick at the goal for the
// figure and a dark line at 1 (the hand-written baseline). Drawn with the
// standard library's image packages and the 5×7 font of glyphs.go.

// goals are the issue-19 targets for each figure's cost ratio (P4's is a
// floor: the egress guard must not be measurably slower, ≥ 0.98 of the
// calls). The detectors' row has none.
var goals = map[string]float64{"P1": 1.15, "P2": 1.10, "P3": 1.3, "P5": 1.11, "P4": 1 / 0.98}

func goalOf(s Series) (float64, bool) {
	if strings.Contains(s.Case, "detectors") {
		return 0, false
	}
	g, ok := goals[s.Figure]
	return g, ok
}

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colText       = color.RGBA{20, 20, 20, 255}
	colGrid       = color.RGBA{225, 225, 225, 255}
	colOne        = color.RGBA{60, 60, 60, 255}
	colBar        = color.RGBA{70, 120, 200, 255}
	colMedian     = color.RGBA{10, 40, 110, 255}
	colGoal       = color.RGBA{210, 40, 40, 255}
	colStripe     = color.RGBA{246, 246, 250, 255}
)

const (
	glyphScale = 2
	charW      = 6 * glyphScale // five pixels and a gap
	lineH      = 22
	labelChars = 50
	plotW      = 560
	margin     = 12
)

// shortLabel fits a row's figure and case into the label column.
func shortLabel(s Series) string {
	c := strings.NewReplacer(
		"tools/call list_bookings, ", "",
		"hotel server with / without egress guard, ", "egress guard, ",
		"bookings by date (1 chain, first 50 of a month)", "first 50 of a month",
		"revenue by hotel (1 chain, a quarter, aggregate)", "revenue per hotel",
		"PostgreSQL (RLS)", "PostgreSQL",
		"MariaDB (JSON_TABLE)", "MariaDB",
		"MySQL (JSON_TABLE)", "MySQL",
		"serializer, 50-row list_bookings page (tagged struct)", "redact 50-row page, tagged struct",
		"serializer, the same page as map[string]any", "redact the page as a map",
		"guard path of one tool call (SQLite, 50 rows)", "guard path of one call, SQLite",
	).Replace(s.Case)
	l := s.Figure + " " + strings.TrimSuffix(c, " bookings")
	if r := []rune(l); len(r) > labelChars {
		l = string(r[:labelChars-2]) + ".."
	}
	return l
}

// writePNG draws the summary to path.
func (sum *Summary) writePNG(path string) error {
	img := sum.plot()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// plotGeometry places the axis: x of a ratio, and the axis' upper end.
type plotGeometry struct {
	x0   int // pixel of ratio 0
	xMax float64
}

func (g plotGeometry) x(v float64) int {
	return g.x0 + int(math.Round(v/g.xMax*plotW))
}

func (sum *Summary) axisMax() float64 {
	top := 1.5
	for _, s := range sum.Series {
		if len(s.Costs) > 0 {
			top = max(top, s.Max())
		}
		if g, ok := goalOf(s); ok {
			top = max(top, g)
		}
	}
	return math.Ceil(top*2+0.2) / 2 // to the next half, with some room
}

func (sum *Summary) plot() *image.RGBA {
	header := 3 * lineH
	footer := 3 * lineH
	w := 2*margin + labelChars*charW + plotW + 4*charW
	h := header + len(sum.Series)*lineH + footer
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)
	g := plotGeometry{x0: 2*margin + labelChars*charW, xMax: sum.axisMax()}
	lo, hi := sum.loadRange()

	drawText(img, margin, 6, fmt.Sprintf("tenantmcp cost × (library / hand-written), min–max over %s", sum.runsPerRow()), colText)
	drawText(img, margin, 6+lineH, "bar: min–max  dot: median  red: goal  dark line: 1.0", colText)

	top, bottom := header, header+len(sum.Series)*lineH
	for i := range sum.Series {
		if i%2 == 1 {
			fill(img, image.Rect(margin, top+i*lineH, w-margin, top+(i+1)*lineH), colStripe)
		}
	}
	// Grid every 0.5, labelled below the rows.
	for v := 0.0; v <= g.xMax+1e-9; v += 0.5 {
		x := g.x(v)
		fill(img, image.Rect(x, top, x+1, bottom), colGrid)
		drawText(img, x-charW, bottom+4, fmt.Sprintf("%.1f", v), colText)
	}
	x1 := g.x(1)
	fill(img, image.Rect(x1-1, top, x1+1, bottom), colOne)

	for i, s := range sum.Series {
		y := top + i*lineH
		drawText(img, margin, y+4, shortLabel(s), colText)
		mid := y + lineH/2
		if gv, ok := goalOf(s); ok {
			gx := g.x(gv)
			fill(img, image.Rect(gx-1, y+2, gx+1, y+lineH-2), colGoal)
		}
		if len(s.Costs) == 0 {
			drawText(img, g.x0+4, y+4, "not measured", colGoal)
			continue
		}
		a, b := g.x(s.Min()), g.x(s.Max())
		fill(img, image.Rect(a, mid-3, b+1, mid+3), colBar)
		m := g.x(s.Median())
		fill(img, image.Rect(m-4, mid-5, m+5, mid+6), colMedian)
	}
	var machine string
	if len(sum.Runs) > 0 {
		m := sum.Runs[0].Machine
		machine = fmt.Sprintf("%s, %d cores, %s, %s", m.CPU, m.Cores, m.Kernel, m.Go)
	}
	drawText(img, margin, bottom+4+lineH, machine, colText)
	drawText(img, margin, bottom+4+2*lineH, fmt.Sprintf("load average (1 min) %.1f–%.1f", lo, hi), colText)
	return img
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r.Intersect(img.Bounds()), image.NewUniform(c), image.Point{}, draw.Src)
}

// drawText writes s at (x, y), the glyphs' top left corner.
func drawText(img *image.RGBA, x, y int, s string, c color.Color) {
	for _, r := range s {
		bits, ok := glyphs[r]
		if !ok {
			bits, ok = glyphs[unicode.ToUpper(r)]
		}
		if ok {
			for row, line := range bits {
				for col := range 5 {
					if line&(0x10>>col) != 0 {
						fill(img, image.Rect(x+col*glyphScale, y+row*glyphScale, x+(col+1)*glyphScale, y+(row+1)*glyphScale), c)
					}
				}
			}
		}
		x += charW
	}
}
