//go:build linux

package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of ds by the nearest-rank method.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// medianF returns the median of fs.
func medianF(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianD returns the median of ds.
func medianD(ds []time.Duration) time.Duration {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return time.Duration(medianF(fs))
}

// mean returns the arithmetic mean of ds.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// us formats d in microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.0f us", float64(d)/float64(time.Microsecond))
}

// secs formats d in seconds.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
