package server

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// LoadTokens reads a tokens file: one "<token> <project>" pair per line,
// blank lines and lines starting with '#' ignored. Errors name the line, never
// its content, so a malformed file cannot leak a token into a log.
func LoadTokens(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open tokens file: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	tokens := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("tokens file %s line %d: want \"<token> <project>\"", path, n)
		}
		if _, dup := tokens[fields[0]]; dup {
			return nil, fmt.Errorf("tokens file %s line %d: token repeated", path, n)
		}
		tokens[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read tokens file: %w", err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("tokens file %s defines no tokens", path)
	}
	return tokens, nil
}
