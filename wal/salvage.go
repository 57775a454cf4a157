package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SeqRange is an inclusive range of sequence numbers.
type SeqRange struct{ From, To uint64 }

// SalvageReport says what Salvage copied and what it could not read.
type SalvageReport struct {
	Entries     int      // entries copied, with their original seqs
	Blocks      int      // blocks written to the new file
	Intents     int      // open intents copied
	Checkpoints []string // owners whose checkpoint was copied
	Archived    int      // archive records copied
	LastSeq     uint64   // last seq the source's metadata or entries name
	// LastSeqKnown is false when the walk of the blocks could not reach
	// the end of the log: entries after LastSeq may have existed and be
	// lost.
	LastSeqKnown bool
	// Lost are seqs above every copied checkpoint that were not found:
	// entries lost for good. Unaccounted are missing seqs at or below the
	// newest checkpoint: compaction may have dropped them (then the
	// checkpoints cover them) or they were lost.
	Lost        []SeqRange
	Unaccounted []SeqRange
	LostOwners  []string // checkpoints that could not be read
	LostArchive bool     // some archive records could not be read
	Problems    []string // what went wrong where, one line each
	// Scanned counts the entries (in Entries) that the walk of the tree
	// could not reach and a scan of every page found: blocks under a
	// damaged branch page.
	Scanned      int
	FirstCopied  uint64 // lowest seq copied (0 if none)
	SourceBytes  int64
	SourceIntact bool // nothing was lost
}

// Salvage copies every readable entry (with its sequence number),
// checkpoint, open intent and archive record of the log file src into a
// new log file dst, which must not exist, and reports what it could not
// read. src is opened read-only (shared lock) and never written; it may
// be cut short or damaged: reads that fault on missing pages are caught
// and counted as lost.
func Salvage(src, dst string) (SalvageReport, error) {
	var rep SalvageReport
	if _, err := os.Lstat(dst); err == nil {
		return rep, fmt.Errorf("wal: salvage %s: destination %s already exists", src, dst)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return rep, fmt.Errorf("wal: salvage %s: %w", src, err)
	}
	rep.SourceBytes = fi.Size()
	sdb, err := openBolt(src, Options{LockTimeout: defaultLockTimeout, ReadOnly: true})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return rep, fmt.Errorf("wal: salvage: %w", &lockedError{path: src})
		case isNotBolt(err):
			return rep, &notDatabaseError{path: src, why: fmt.Sprintf("not a bbolt file (%v); nothing can be salvaged", err)}
		}
		return rep, fmt.Errorf("wal: salvage %s: %w", src, err)
	}
	defer sdb.Close()

	// The new file is written without a sync per block (one per block made
	// a large salvage take minutes) and synced once when complete: until
	// then it is nobody's log.
	out, err := Open(dst, Options{LockTimeout: defaultLockTimeout, NoSync: true})
	if err != nil {
		return rep, fmt.Errorf("wal: salvage %s: create %s: %w", src, dst, err)
	}
	s := &salvager{path: src, src: sdb, dst: out, rep: &rep}
	werr := s.run()
	if werr == nil {
		if err := out.db.Sync(); err != nil {
			werr = fmt.Errorf("sync: %w", err)
		}
	}
	if cerr := out.Close(); cerr != nil && werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(dst)
		return rep, fmt.Errorf("wal: salvage %s into %s: %w", src, dst, werr)
	}
	rep.SourceIntact = len(rep.Lost) == 0 && len(rep.LostOwners) == 0 && !rep.LostArchive && len(rep.Problems) == 0
	return rep, nil
}

type salvager struct {
	path string // of the source, for the page scan
	src  *bolt.DB
	dst  *Log
	rep  *SalvageReport
	// metaRead: the source's own last seq was read. Without it, in a file
	// with problems, the end of the walk is not the end of the log: a cut
	// file can lose the tree's later pages with no fault on the way.
	metaRead bool
}

// guarded runs fn in a read transaction of the source; a fault or panic
// on a damaged page becomes an error.
func (s *salvager) guarded(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unreadable page: %v", r)
		}
	}()
	return s.src.View(fn)
}

func (s *salvager) problem(format string, args ...any) {
	s.rep.Problems = append(s.rep.Problems, fmt.Sprintf(format, args...))
}

func (s *salvager) run() error {
	// The source's last seq, if its metadata is readable.
	if err := s.guarded(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketMeta); m != nil {
			if v := m.Get(keyLastSeq); len(v) == 8 {
				s.rep.LastSeq = binary.BigEndian.Uint64(v)
				s.metaRead = true
			}
		}
		return nil
	}); err != nil {
		s.problem("metadata: %v", err)
	}
	copied, err := s.blocks()
	if err != nil {
		return err
	}
	if err := s.intents(copied); err != nil {
		return err
	}
	newestCP, err := s.checkpoints()
	if err != nil {
		return err
	}
	// New appends must never reuse a seq a checkpoint or a lost entry had.
	s.rep.LastSeq = max(s.rep.LastSeq, newestCP)
	s.missing(copied, newestCP)
	if len(s.rep.Lost) > 0 || !s.rep.LastSeqKnown {
		if err := s.scanned(copied, newestCP); err != nil {
			return err
		}
	}
	if err := s.dst.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyLastSeq, be64(s.rep.LastSeq))
	}); err != nil {
		return fmt.Errorf("write last seq: %w", err)
	}
	return s.archive()
}

// blocks copies the readable entries block by block and returns the seqs
// copied, in order.
func (s *salvager) blocks() ([]SeqRange, error) {
	var copied []SeqRange
	next := uint64(0) // the first block key not yet visited
	probe := uint64(1)
	blind := false // the last seek faulted: the end of the log is unknown
	for {
		var (
			key     []byte
			entries []Entry
			derr    error
		)
		err := s.guarded(func(tx *bolt.Tx) error {
			blocks := tx.Bucket(bucketBlocks)
			if blocks == nil {
				return errors.New("bucket blocks missing")
			}
			k, _ := blocks.Cursor().Seek(be64(next))
			if k == nil {
				return nil
			}
			key = append([]byte(nil), k...)
			first, v, err := blockAt(blocks, k)
			if err != nil {
				derr = err
				return nil
			}
			derr = decodeBlock(first, v, func(e Entry, _ []byte) error {
				e.Payload = bytes.Clone(e.Payload)
				entries = append(entries, e)
				return nil
			})
			return nil
		})
		if err != nil && key == nil {
			// The walk itself hit a missing page: look further on for
			// blocks the tree can still reach.
			if !blind {
				s.problem("blocks at or after seq %d: %v (looking further on)", next, err)
			}
			blind = true
			if next > 1<<48 {
				return copied, nil
			}
			next += probe
			probe *= 2
			continue
		}
		if key == nil {
			s.rep.LastSeqKnown = !blind && (s.metaRead || len(s.rep.Problems) == 0)
			return copied, nil
		}
		probe, blind = 1, false
		first := binary.BigEndian.Uint64(key)
		if err != nil {
			s.problem("block %d: %v", first, err)
		} else if derr != nil {
			s.problem("block %d: %v", first, derr)
		}
		// A damaged key or offset can make a block repeat seqs already
		// copied: the first copy stands.
		if len(copied) > 0 {
			done := copied[len(copied)-1].To
			kept := entries[:0]
			for _, e := range entries {
				if e.Seq > done {
					kept = append(kept, e)
				}
			}
			if n := len(entries) - len(kept); n > 0 {
				s.problem("block %d: %d entries repeat seqs already copied (damaged key?); skipped", first, n)
			}
			entries = kept
		}
		if len(entries) > 0 {
			if err := s.writeBlock(entries); err != nil {
				return nil, err
			}
			// A damaged block can yield entries with holes between them:
			// each contiguous run is a range of its own, so a hole is
			// reported as missing, not counted as copied.
			for i, e := range entries {
				if i > 0 && e.Seq == entries[i-1].Seq+1 {
					copied[len(copied)-1].To = e.Seq
					continue
				}
				copied = append(copied, SeqRange{e.Seq, e.Seq})
			}
			s.rep.LastSeq = max(s.rep.LastSeq, entries[len(entries)-1].Seq)
		}
		next = first + 1
	}
}

// writeBlock writes entries (original seqs) as one block of the new file.
func (s *salvager) writeBlock(entries []Entry) error {
	var buf []byte
	for i := range entries {
		buf = encodeEntry(buf, &entries[i])
	}
	first, last := entries[0].Seq, entries[len(entries)-1].Seq
	err := s.dst.db.Update(func(tx *bolt.Tx) error {
		if err := putBlock(tx.Bucket(bucketBlocks), first, buf); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyLastSeq, be64(max(last, s.rep.LastSeq)))
	})
	if err != nil {
		return fmt.Errorf("write block %d: %w", first, err)
	}
	s.rep.Entries += len(entries)
	s.rep.Blocks++
	return nil
}

// scanned copies the lost entries that a scan of the source's pages finds
// (blocks under a damaged branch page, which the walk of the tree cannot
// reach; past the last seq it knows when the walk could not find the
// end) with their open intents, and sorts what is still missing again.
// Only seqs above every checkpoint are taken: below, a freed page may
// hold what compaction dropped on purpose.
func (s *salvager) scanned(copied []SeqRange, newestCP uint64) error {
	known, last := s.rep.LastSeqKnown, s.rep.LastSeq
	found, err := scanBlocks(s.path, func(seq uint64) bool {
		return seq > newestCP && !covered(copied, seq) && (!known || seq <= last)
	})
	if err != nil {
		s.problem("page scan: %v", err)
		return nil
	}
	if len(found) == 0 {
		return nil
	}
	seqs := make([]uint64, 0, len(found))
	for seq := range found {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	var added []SeqRange
	var run []Entry
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		if err := s.writeBlock(run); err != nil {
			return err
		}
		added = append(added, SeqRange{run[0].Seq, run[len(run)-1].Seq})
		run = run[:0]
		return nil
	}
	for _, seq := range seqs {
		if len(run) > 0 && seq != run[len(run)-1].Seq+1 {
			if err := flush(); err != nil {
				return err
			}
		}
		run = append(run, found[seq])
	}
	if err := flush(); err != nil {
		return err
	}
	s.rep.Scanned = len(seqs)
	s.problem("%d entries the tree no longer reaches were found by a scan of the file's pages", len(seqs))
	if err := s.intents(added); err != nil {
		return err
	}
	all := append(slices.Clone(copied), added...)
	slices.SortFunc(all, func(a, b SeqRange) int { return cmp.Compare(a.From, b.From) })
	merged := all[:0]
	for _, r := range all {
		if n := len(merged); n > 0 && r.From <= merged[n-1].To+1 {
			merged[n-1].To = max(merged[n-1].To, r.To)
			continue
		}
		merged = append(merged, r)
	}
	s.rep.LastSeq = max(s.rep.LastSeq, seqs[len(seqs)-1])
	s.rep.Lost, s.rep.Unaccounted = nil, nil
	s.missing(merged, newestCP)
	return nil
}

// missing sorts the seqs not copied into lost and unaccounted ranges.
func (s *salvager) missing(copied []SeqRange, newestCP uint64) {
	var gaps []SeqRange
	from := uint64(1)
	for _, r := range copied {
		if r.From > from {
			gaps = append(gaps, SeqRange{from, r.From - 1})
		}
		from = r.To + 1
	}
	if from <= s.rep.LastSeq {
		gaps = append(gaps, SeqRange{from, s.rep.LastSeq})
	}
	if len(copied) > 0 {
		s.rep.FirstCopied = copied[0].From
	}
	for _, g := range gaps {
		if g.From <= newestCP {
			s.rep.Unaccounted = append(s.rep.Unaccounted, SeqRange{g.From, min(g.To, newestCP)})
		}
		if g.To > newestCP {
			s.rep.Lost = append(s.rep.Lost, SeqRange{max(g.From, newestCP+1), g.To})
		}
	}
}

func covered(copied []SeqRange, seq uint64) bool {
	i := sort.Search(len(copied), func(i int) bool { return copied[i].To >= seq })
	return i < len(copied) && copied[i].From <= seq
}

// intents copies the open intents whose entries were copied.
func (s *salvager) intents(copied []SeqRange) error {
	var seqs []uint64
	err := s.guarded(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIntents)
		if b == nil {
			return errors.New("bucket intents missing")
		}
		return b.ForEach(func(k, _ []byte) error {
			if len(k) == 8 && covered(copied, binary.BigEndian.Uint64(k)) {
				seqs = append(seqs, binary.BigEndian.Uint64(k))
			}
			return nil
		})
	})
	if err != nil {
		s.problem("intents: %v (open requests may be re-sent once)", err)
	}
	if len(seqs) == 0 {
		return nil
	}
	s.rep.Intents += len(seqs)
	return s.dst.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIntents)
		for _, seq := range seqs {
			if err := b.Put(be64(seq), []byte{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkpoints copies the readable checkpoints and returns the highest seq
// one of them covers.
func (s *salvager) checkpoints() (newest uint64, _ error) {
	var owners []string
	err := s.guarded(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return errors.New("bucket checkpoints missing")
		}
		return b.ForEach(func(k, _ []byte) error {
			owners = append(owners, string(k))
			return nil
		})
	})
	if err != nil {
		s.problem("checkpoints: %v", err)
	}
	for _, owner := range owners {
		var v []byte
		err := s.guarded(func(tx *bolt.Tx) error {
			raw := tx.Bucket(bucketCheckpoints).Get([]byte(owner))
			cp, err := decodeCheckpoint(owner, raw)
			if err != nil {
				return err
			}
			newest = max(newest, cp.Seq)
			v = bytes.Clone(raw)
			return nil
		})
		if err != nil {
			s.problem("checkpoint %q: %v", owner, err)
			s.rep.LostOwners = append(s.rep.LostOwners, owner)
			continue
		}
		if err := s.dst.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketCheckpoints).Put([]byte(owner), v)
		}); err != nil {
			return 0, fmt.Errorf("write checkpoint %q: %w", owner, err)
		}
		s.rep.Checkpoints = append(s.rep.Checkpoints, owner)
	}
	return newest, nil
}

func (s *salvager) archive() error {
	items := map[string][]byte{}
	err := s.guarded(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchive)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			items[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	if err != nil {
		s.problem("archive: %v (records read before the damage are copied)", err)
		s.rep.LostArchive = true
	}
	if len(items) == 0 {
		return nil
	}
	s.rep.Archived = len(items)
	return s.dst.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketArchive)
		if err != nil {
			return err
		}
		for k, v := range items {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
}
