//go:build linux

package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// writeHistogram draws one histogram of ds as a PNG.
func writeHistogram(path string, ds []time.Duration) error {
	return writeHistograms(path, "", []histSeries{{ds: ds}})
}

// histSeries is one panel of writeHistograms.
type histSeries struct {
	label string
	ds    []time.Duration
}

// writeHistograms draws one histogram per series, stacked, on a shared x
// axis in seconds from 0 to the largest value, 40 bars each, with tick
// labels, each panel's label and its largest bar's count.
func writeHistograms(path, title string, series []histSeries) error {
	const wdt, panel, left, right, top, bottom, bins = 860, 220, 60, 20, 30, 40, 40
	hgt := top + len(series)*panel + bottom
	img := image.NewRGBA(image.Rect(0, 0, wdt, hgt))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text := func(x, y int, c color.Color, s string) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	var maxD time.Duration
	for _, s := range series {
		maxD = max(maxD, quantile(s.ds, 1))
	}
	if title != "" {
		text(left, 18, color.Black, title)
	}
	grid, bar := color.RGBA{220, 220, 220, 255}, color.RGBA{52, 101, 164, 255}
	plotW := wdt - left - right
	bw := plotW / bins
	for p, s := range series {
		y0, y1 := top+p*panel+18, top+(p+1)*panel-8 // plot area of this panel
		counts := make([]int, bins)
		for _, d := range s.ds {
			i := 0
			if maxD > 0 {
				i = min(int(float64(d)/float64(maxD)*bins), bins-1)
			}
			counts[i]++
		}
		tallest := 1
		for _, c := range counts {
			tallest = max(tallest, c)
		}
		for q := 0; q <= 4; q++ {
			x := left + q*bins*bw/4
			for y := y0; y <= y1; y++ {
				img.Set(x, y, grid)
			}
		}
		for x := left; x < left+bins*bw; x++ {
			img.Set(x, y0, grid)
		}
		for i, c := range counts {
			h := c * (y1 - y0) / tallest
			for x := left + i*bw + 1; x < left+(i+1)*bw-1; x++ {
				for y := y1 - h; y < y1; y++ {
					img.Set(x, y, bar)
				}
			}
		}
		for x := left; x <= left+bins*bw; x++ {
			img.Set(x, y1, color.Black)
		}
		for y := y0; y <= y1; y++ {
			img.Set(left, y, color.Black)
		}
		text(left+6, y0-4, color.Black, fmt.Sprintf("%s (n=%d)", s.label, len(s.ds)))
		text(4, y0+10, color.Black, fmt.Sprintf("%d", tallest))
		text(4, y1, color.Black, "0")
	}
	yAxis := top + len(series)*panel - 8
	for q := 0; q <= 4; q++ {
		x := left + q*bins*bw/4
		text(x-10, yAxis+16, color.Black, fmt.Sprintf("%.1f", maxD.Seconds()*float64(q)/4))
	}
	text(left+plotW/2-90, yAxis+32, color.Black, "seconds from create to Ready")
	text(4, top+8, color.Black, "count")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
