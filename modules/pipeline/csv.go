package pipeline

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

// JSONLToCSV writes the JSON objects of a JSONL export (results or
// failures) as CSV: one row a line, one column per leaf, named by its
// path ("steps.verdict.m1.confidence"), in the order the columns first
// appear; an array is one cell holding its JSON. A value a row lacks is
// an empty cell.
func JSONLToCSV(jsonl []byte, w io.Writer) error {
	var cols []string
	seen := map[string]bool{}
	var rows []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v map[string]any
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		row := map[string]string{}
		if err := flattenInto(row, "", v); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		for _, k := range leafOrder(v, "") {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(cols); err != nil {
		return err
	}
	rec := make([]string, len(cols))
	for _, row := range rows {
		for i, c := range cols {
			rec[i] = row[c]
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// leafOrder lists v's leaf paths: key and status first when there, then
// the object's keys in the order encoding/json writes them (sorted).
func leafOrder(v any, prefix string) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{prefix}
	}
	var out []string
	first := []string{"key", "status"}
	if prefix == "" {
		for _, k := range first {
			if _, ok := m[k]; ok {
				out = append(out, k)
			}
		}
	}
	for _, k := range sortedMapKeys(m) {
		if prefix == "" && (k == "key" || k == "status") {
			continue
		}
		out = append(out, leafOrder(m[k], join(prefix, k))...)
	}
	return out
}

func flattenInto(row map[string]string, prefix string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if err := flattenInto(row, join(prefix, k), x); err != nil {
				return err
			}
		}
	case nil:
		row[prefix] = ""
	case string:
		row[prefix] = v
	case bool:
		row[prefix] = strconv.FormatBool(v)
	case json.Number:
		row[prefix] = v.String()
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		row[prefix] = string(b)
	}
	return nil
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func sortedMapKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
