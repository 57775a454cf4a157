// Whether the deep-mode switch is on: null when the switch is not on the
// page; else the "on" selector when the profile has one, else the toggle's
// aria-pressed / aria-checked / checked.
(s) => {
  const t = document.querySelector(s.toggle);
  if (!t) return null;
  if (s.on) return document.querySelector(s.on) !== null;
  const a = t.getAttribute('aria-pressed') ?? t.getAttribute('aria-checked');
  if (a !== null) return a === 'true';
  return !!t.checked;
}
