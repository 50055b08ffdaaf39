// Package prom scrapes Prometheus text endpoints (the provider's, the
// function's, Crossplane core's, kube-apiserver's, the Widget API's) for
// tests and benchmarks: the one parser of metrics in this project.
package prom

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// A Sample is one line of a text exposition: a series and its value.
type Sample struct {
	// Series is the line before its value, as served:
	// name{label="value",...}.
	Series string
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the samples of one scrape, in the order served.
type Samples []Sample

// Scrape reads url with c (http.DefaultClient when nil). A non-200 answer
// is an error.
func Scrape(ctx context.Context, c *http.Client, url string) (Samples, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot scrape %s: %w", url, err)
	}
	rsp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot scrape %s: %w", url, err)
	}
	defer rsp.Body.Close() //nolint:errcheck // read-only body
	if rsp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, rsp.Body)
		return nil, fmt.Errorf("cannot scrape %s: it answered %d", url, rsp.StatusCode)
	}
	return Parse(rsp.Body)
}

// Parse reads a Prometheus text exposition. Comments and lines it cannot
// read are skipped; timestamps are ignored.
func Parse(r io.Reader) (Samples, error) {
	var out Samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if s, ok := parseLine(sc.Text()); ok {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("cannot read metrics: %w", err)
	}
	return out, nil
}

func parseLine(line string) (Sample, bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return Sample{}, false
	}
	s := Sample{Labels: map[string]string{}}
	var rest string
	if i := strings.IndexAny(line, "{ \t"); i >= 0 && line[i] == '{' {
		s.Name = line[:i]
		end, ok := parseLabels(line[i+1:], s.Labels)
		if !ok {
			return Sample{}, false
		}
		s.Series = line[:i+1+end+1]
		rest = line[i+1+end+1:]
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return Sample{}, false
		}
		s.Name, s.Series = f[0], f[0]
		rest = strings.TrimPrefix(line, f[0])
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return Sample{}, false
	}
	s.Value = v
	return s, true
}

// parseLabels reads label="value" pairs up to the closing '}' and returns
// that brace's index in s. Values may hold escaped quotes, commas and braces.
func parseLabels(s string, into map[string]string) (int, bool) {
	i := 0
	for i < len(s) {
		switch s[i] {
		case '}':
			return i, true
		case ',', ' ':
			i++
			continue
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return 0, false
		}
		name := s[i : i+eq]
		j := i + eq + 2
		var v strings.Builder
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[j])
				}
				continue
			}
			v.WriteByte(s[j])
		}
		if j >= len(s) {
			return 0, false
		}
		into[name] = v.String()
		i = j + 1
	}
	return 0, false
}

// Sum returns the sum of the values of metric name's samples whose labels
// include every pair in match.
func (ss Samples) Sum(name string, match map[string]string) float64 {
	sum := 0.0
	for _, s := range ss {
		if s.Name == name && has(s.Labels, match) {
			sum += s.Value
		}
	}
	return sum
}

// Has reports whether any sample of metric name was served.
func (ss Samples) Has(name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Of returns metric name's samples.
func (ss Samples) Of(name string) Samples {
	var out Samples
	for _, s := range ss {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// By adds up the samples' values by the value of label (the empty string
// for samples without it).
func (ss Samples) By(label string) map[string]float64 {
	m := map[string]float64{}
	for _, s := range ss {
		m[s.Labels[label]] += s.Value
	}
	return m
}

// Series returns the samples as series -> value, adding up repeated series.
func (ss Samples) Series() map[string]float64 {
	m := make(map[string]float64, len(ss))
	for _, s := range ss {
		m[s.Series] += s.Value
	}
	return m
}

func has(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}
