// Package cronspec parses schedule expressions and computes their next
// firing in a time zone. It accepts the forms a cron user and an AWS user
// write:
//
//   - a standard five-field cron expression, "m h dom mon dow" (day of week
//     0-6 or SUN-SAT, Sunday 0), or a descriptor: @hourly, @daily
//     (@midnight), @weekly, @monthly, @yearly (@annually);
//   - EventBridge Scheduler's cron(m h dom mon dow year), with day of week
//     1-7 (SUN=1) or SUN-SAT, one of day-of-month and day-of-week "?", and
//     year "*";
//   - rate(N minutes|hours|days), N at least 1;
//   - at(yyyy-mm-ddThh:mm:ss), once, in the time zone.
//
// Times follow EventBridge Scheduler's rules on daylight saving time: a
// cron firing that falls in the hour skipped in spring does not happen, one
// in the hour repeated in autumn happens once (at its first occurrence); a
// rate of days is a fixed 24 hours.
//
// The package imports the standard library and github.com/robfig/cron/v3
// (which evaluates the cron fields); the time zone database is embedded
// (time/tzdata), so IANA names work where the system has none.
package cronspec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones on systems without a zoneinfo database (Lambda's provided.al2023)

	robfig "github.com/robfig/cron/v3"
)

// Kind is the form of a Spec.
type Kind string

// The kinds of schedule.
const (
	KindCron Kind = "cron"
	KindRate Kind = "rate"
	KindAt   Kind = "at"
)

// MaxExpressionLen bounds an expression's length.
const MaxExpressionLen = 256

// Spec is a parsed schedule expression in a time zone. It is immutable.
type Spec struct {
	expr string
	kind Kind
	loc  *time.Location
	// cron
	sched robfig.Schedule
	aws   string // the EventBridge Scheduler expression
	// rate
	every time.Duration
	// at
	at time.Time
}

var parser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

var (
	awsForm  = regexp.MustCompile(`^(cron|rate|at)\((.*)\)$`)
	rateBody = regexp.MustCompile(`^([0-9]+)\s+([a-z]+)$`)
)

// LoadLocation returns the time zone named tz: an IANA name such as
// "Europe/Paris", or "UTC" (also for ""). "Local" is refused: a schedule
// must not depend on the machine it runs on.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, errors.New(`timezone "Local" depends on the machine; name an IANA zone such as "Europe/Paris", or "UTC"`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || len(tz) > 64 {
		return nil, fmt.Errorf("timezone %q is not an IANA time zone name; use one such as \"America/New_York\", \"Europe/Paris\" or \"UTC\"", tz)
	}
	return loc, nil
}

// Parse parses expr in the time zone tz (see LoadLocation). Its errors say
// what to fix.
func Parse(expr, tz string) (*Spec, error) {
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return nil, errors.New(`the schedule is empty; give a cron expression such as "0 9 * * 1-5", or rate(1 hour), cron(0 9 ? * MON-FRI *) or at(2030-01-01T09:00:00)`)
	case len(expr) > MaxExpressionLen:
		return nil, fmt.Errorf("the schedule is %d characters long; at most %d", len(expr), MaxExpressionLen)
	}
	s := &Spec{expr: expr, loc: loc}
	if m := awsForm.FindStringSubmatch(expr); m != nil {
		body := strings.TrimSpace(m[2])
		switch m[1] {
		case "rate":
			return s, s.parseRate(body)
		case "at":
			return s, s.parseAt(body)
		default:
			return s, s.parseAWSCron(body)
		}
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, fmt.Errorf("%q: @every is not supported; write a rate such as rate(5 minutes)", expr)
	}
	return s, s.parseCron(expr)
}

// parseCron parses a five-field expression or a descriptor.
func (s *Spec) parseCron(expr string) error {
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		return fmt.Errorf("%q: give the time zone as the timezone field, not in the expression", expr)
	}
	fields := strings.Fields(expr)
	if !strings.HasPrefix(expr, "@") && len(fields) != 5 {
		if len(fields) == 6 {
			return fmt.Errorf("%q has 6 fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or write the AWS form cron(minute hour day-of-month month day-of-week year)", expr)
		}
		return fmt.Errorf("%q has %d fields; a cron expression has 5: minute hour day-of-month month day-of-week, such as \"0 9 * * 1-5\"", expr, len(fields))
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return fmt.Errorf("%q is not a valid cron expression: %s; write minute hour day-of-month month day-of-week, such as \"30 6 * * MON\"", expr, strings.TrimPrefix(err.Error(), "failed to parse "))
	}
	s.kind, s.sched = KindCron, sched
	aws, err := standardToAWS(fields)
	if err != nil {
		aws = "" // fine embedded; AWS() says why not
		s.aws = "!" + err.Error()
	} else {
		s.aws = aws
	}
	return s.checkFires()
}

// parseAWSCron parses the body of cron(...).
func (s *Spec) parseAWSCron(body string) error {
	f := strings.Fields(body)
	if len(f) != 6 {
		return fmt.Errorf("cron(%s) has %d fields; the AWS form has 6: cron(minute hour day-of-month month day-of-week year), such as cron(0 9 ? * MON-FRI *)", body, len(f))
	}
	for _, v := range f {
		if special(v) {
			return fmt.Errorf("cron(%s): %q uses L, W or #, which superstep does not evaluate; list the days instead", body, v)
		}
	}
	if f[5] != "*" {
		return fmt.Errorf("cron(%s): the year field is %q; only * is supported (use at(...) for a single date)", body, f[5])
	}
	if (f[2] == "?") == (f[4] == "?") {
		return fmt.Errorf("cron(%s): exactly one of day-of-month (%s) and day-of-week (%s) must be ?, as EventBridge requires", body, f[2], f[4])
	}
	dow, err := mapDays(f[4], -1)
	if err != nil {
		return fmt.Errorf("cron(%s): day-of-week %q: %v; use 1-7 (SUN=1) or SUN-SAT", body, f[4], err)
	}
	std := strings.Join([]string{f[0], f[1], f[2], f[3], dow}, " ")
	sched, err := parser.Parse(std)
	if err != nil {
		return fmt.Errorf("cron(%s) is not valid: %s", body, strings.TrimPrefix(err.Error(), "failed to parse "))
	}
	s.kind, s.sched = KindCron, sched
	s.aws = "cron(" + strings.Join(f, " ") + ")"
	return s.checkFires()
}

// checkFires refuses a cron expression that never fires (February 30th).
func (s *Spec) checkFires() error {
	now := time.Now().In(s.loc)
	if s.sched.Next(now).IsZero() && s.sched.Next(now.AddDate(4, 0, 0)).IsZero() {
		return fmt.Errorf("%q never fires (no such date); check the day-of-month and month", s.expr)
	}
	return nil
}

func (s *Spec) parseRate(body string) error {
	m := rateBody.FindStringSubmatch(strings.ToLower(body))
	if m == nil {
		return fmt.Errorf("rate(%s): want rate(N minutes|hours|days), such as rate(5 minutes)", body)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 1_000_000 {
		return fmt.Errorf("rate(%s): the value must be a whole number from 1", body)
	}
	var unit time.Duration
	switch strings.TrimSuffix(m[2], "s") {
	case "minute":
		unit = time.Minute
	case "hour":
		unit = time.Hour
	case "day":
		unit = 24 * time.Hour
	default:
		return fmt.Errorf("rate(%s): unit %q; want minutes, hours or days", body, m[2])
	}
	s.kind, s.every = KindRate, time.Duration(n)*unit
	u := strings.TrimSuffix(m[2], "s")
	if n != 1 {
		u += "s"
	}
	s.aws = fmt.Sprintf("rate(%d %s)", n, u)
	return nil
}

func (s *Spec) parseAt(body string) error {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", body, s.loc)
	if err != nil {
		return fmt.Errorf("at(%s): want at(yyyy-mm-ddThh:mm:ss), such as at(2030-01-31T09:00:00), in the schedule's timezone", body)
	}
	s.kind, s.at, s.aws = KindAt, t, "at("+body+")"
	return nil
}

// Expression returns the expression as given (trimmed).
func (s *Spec) Expression() string { return s.expr }

// Kind returns the form of the expression.
func (s *Spec) Kind() Kind { return s.kind }

// Location returns the time zone the expression is evaluated in.
func (s *Spec) Location() *time.Location { return s.loc }

// Interval returns a rate's period (zero for other kinds).
func (s *Spec) Interval() time.Duration { return s.every }

// AWS returns the expression in EventBridge Scheduler's form (cron(...),
// rate(...) or at(...)), or an error saying why it has none: a standard
// cron expression that restricts both day-of-month and day-of-week, say.
func (s *Spec) AWS() (string, error) {
	if msg, bad := strings.CutPrefix(s.aws, "!"); bad {
		return "", errors.New(msg)
	}
	return s.aws, nil
}

// Next returns the first firing strictly after after, or false if there
// is none (an at() in the past). anchor is when a rate started (its
// firings are anchor + k*period; ignored by the other kinds).
func (s *Spec) Next(after, anchor time.Time) (time.Time, bool) {
	switch s.kind {
	case KindAt:
		if s.at.After(after) {
			return s.at, true
		}
		return time.Time{}, false
	case KindRate:
		if anchor.After(after) {
			return anchor, true
		}
		k := after.Sub(anchor)/s.every + 1
		return anchor.Add(k * s.every), true
	}
	t := s.sched.Next(after.In(s.loc))
	for i := 0; i < 4 && !t.IsZero() && s.repeated(t); i++ {
		t = s.sched.Next(t)
	}
	if t.IsZero() {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// repeated reports whether t is the second occurrence of its wall-clock
// time (the hour repeated when clocks go back): EventBridge Scheduler
// fires once, at the first.
func (s *Spec) repeated(t time.Time) bool {
	_, before := t.Add(-3 * time.Hour).In(s.loc).Zone()
	_, now := t.In(s.loc).Zone()
	if before <= now {
		return false
	}
	earlier := t.Add(-time.Duration(before-now) * time.Second).In(s.loc)
	lt := t.In(s.loc)
	return earlier.Hour() == lt.Hour() && earlier.Minute() == lt.Minute() && earlier.Day() == lt.Day()
}

// Previous returns the latest firing at or before t after from (exclusive),
// and how many firings there were in (from, t]; zero time if none.
func (s *Spec) Previous(from, t, anchor time.Time) (last time.Time, n int) {
	for cur := from; ; {
		nx, ok := s.Next(cur, anchor)
		if !ok || nx.After(t) {
			return last, n
		}
		last, n, cur = nx, n+1, nx
		if n >= 100_000 { // a rate of minutes over a long stop: count no further
			return last, n
		}
	}
}

var specialToken = regexp.MustCompile(`^([0-9]*L|[0-9]+W|LW)$`)

// special reports whether a field uses L, W or #.
func special(v string) bool {
	if strings.Contains(v, "#") {
		return true
	}
	for _, p := range strings.FieldsFunc(strings.ToUpper(v), func(r rune) bool { return r == ',' || r == '-' || r == '/' }) {
		if specialToken.MatchString(p) {
			return true
		}
	}
	return false
}

var dayNames = map[string]bool{"SUN": true, "MON": true, "TUE": true, "WED": true, "THU": true, "FRI": true, "SAT": true}

// mapDays shifts the numbers of a day-of-week field by delta (-1: AWS's
// 1-7 to cron's 0-6; +1 the other way); names, "*" and "?" stay.
func mapDays(field string, delta int) (string, error) {
	parts := strings.Split(field, ",")
	for i, p := range parts {
		base, step, hasStep := strings.Cut(p, "/")
		if hasStep && delta > 0 && base == "*" {
			return "", errors.New("a step over every day does not translate")
		}
		ends := strings.Split(base, "-")
		for j, e := range ends {
			if e == "*" || e == "?" || dayNames[strings.ToUpper(e)] {
				continue
			}
			n, err := strconv.Atoi(e)
			if err != nil {
				return "", fmt.Errorf("%q is not a day", e)
			}
			lo, hi := 1, 7
			if delta > 0 {
				lo, hi = 0, 7
				if n == 7 {
					n = 0
				}
			}
			if n < lo || n > hi {
				return "", fmt.Errorf("day %d is out of range %d-%d", n, lo, hi)
			}
			ends[j] = strconv.Itoa(n + delta)
		}
		parts[i] = strings.Join(ends, "-")
		if hasStep {
			parts[i] += "/" + step
		}
	}
	return strings.Join(parts, ","), nil
}

// standardToAWS translates a five-field expression or a descriptor.
func standardToAWS(f []string) (string, error) {
	if len(f) == 1 {
		switch f[0] {
		case "@hourly":
			return "cron(0 * * * ? *)", nil
		case "@daily", "@midnight":
			return "cron(0 0 * * ? *)", nil
		case "@weekly":
			return "cron(0 0 ? * 1 *)", nil
		case "@monthly":
			return "cron(0 0 1 * ? *)", nil
		case "@yearly", "@annually":
			return "cron(0 0 1 1 ? *)", nil
		}
		return "", fmt.Errorf("%s has no EventBridge form", f[0])
	}
	dom, dow := f[2], f[4]
	switch {
	case dow == "*" || dow == "?":
		dow = "?"
		if dom == "?" {
			dom = "*"
		}
	case dom == "*" || dom == "?":
		dom = "?"
		d, err := mapDays(dow, +1)
		if err != nil {
			return "", fmt.Errorf("day-of-week %q: %v; write the days out (1-5, MON-FRI)", f[4], err)
		}
		dow = d
	default:
		return "", fmt.Errorf("EventBridge Scheduler cannot restrict both day-of-month (%s) and day-of-week (%s); make one of them *", f[2], f[4])
	}
	return fmt.Sprintf("cron(%s %s %s %s %s *)", f[0], f[1], dom, f[3], dow), nil
}
