// The size and overlap rules the browser tests hold every page to, evaluated in the
// page: no chart text (SVG <text>) renders under 10 px, and no two pieces of text,
// form controls or chart labels overlap. Returns {texts, small: [...], overlaps: [...]}.
(() => {
  const MIN_PX = 10;
  const small = [];
  const boxes = []; // [description, rect, element]
  const visible = (r) => r.width > 0.5 && r.height > 0.5;
  // Inside a closed <details> (but for its summary), or otherwise not rendered.
  const hidden = (element) => {
    if (element.checkVisibility && !element.checkVisibility({ visibilityProperty: true, opacityProperty: true })) {
      return true;
    }
    for (let d = element.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) {
      const summary = d.querySelector(':scope > summary');
      if (!d.open && !(summary && summary.contains(element))) return true;
    }
    return false;
  };
  // What an ancestor with overflow other than visible lets show of a rect.
  const clip = (element, rect) => {
    let r = { left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom };
    for (let e = element.parentElement; e && e !== document.body; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.overflowX !== 'visible' || style.overflowY !== 'visible') {
        const c = e.getBoundingClientRect();
        r = { left: Math.max(r.left, c.left), top: Math.max(r.top, c.top),
              right: Math.min(r.right, c.right), bottom: Math.min(r.bottom, c.bottom) };
      }
    }
    return r;
  };
  // Chart text: its size as drawn (font size times the SVG's scale on screen).
  for (const svg of document.querySelectorAll('svg')) {
    if (!visible(svg.getBoundingClientRect()) || hidden(svg)) continue;
    for (const text of svg.querySelectorAll('text')) {
      const content = text.textContent.trim();
      const rect = text.getBoundingClientRect();
      if (content === '' || !visible(rect)) continue;
      const m = text.getScreenCTM();
      const px = parseFloat(getComputedStyle(text).fontSize) * Math.hypot(m.a, m.b);
      if (px < MIN_PX) small.push(`"${content}" ${px.toFixed(1)} px`);
      boxes.push([`chart text "${content}"`, clip(text, rect), text]);
    }
  }
  // Page text, line by line, and form controls.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const content = node.textContent.trim();
    const parent = node.parentElement;
    if (content === '' || !parent || parent.closest('svg, script, style, option, textarea, select') || hidden(parent)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) {
      if (visible(rect)) boxes.push([`text "${content.slice(0, 40)}"`, clip(parent, rect), parent]);
    }
  }
  for (const control of document.querySelectorAll('input, select, button, textarea')) {
    const rect = control.getBoundingClientRect();
    if (visible(rect) && control.type !== 'hidden' && !hidden(control)) {
      boxes.push([`${control.tagName.toLowerCase()} ${control.name || control.id || control.textContent.trim().slice(0, 30)}`, clip(control, rect), control]);
    }
  }
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) {
    const [a, r, ea] = boxes[i];
    for (let j = i + 1; j < boxes.length; j++) {
      const [b, s, eb] = boxes[j];
      // A control's own label text lies inside it.
      if (ea.contains(eb) || eb.contains(ea)) continue;
      const w = Math.min(r.right, s.right) - Math.max(r.left, s.left);
      const h = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
      if (w > 1.5 && h > 1.5) overlaps.push(`${a} / ${b}`);
    }
  }
  return { texts: boxes.length, small: small.slice(0, 20), overlaps: overlaps.slice(0, 20),
           smallCount: small.length, overlapCount: overlaps.length };
})()
