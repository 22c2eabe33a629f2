"""The site's look: its CSS (the lab's, overridden for reading on a laptop, a phone and paper) and its one script,
which opens the closed sections for printing. machinery/site.py puts both into every page."""
import base64
import re


def brace_css(name, side):
    """CSS drawing a TeX brace along the `side` ('bottom' or 'top') of an element of class `name`: curled ends and a
    tip of fixed size (SVG pieces, base64 so the page names no web address) joined by rules, as wide as the element."""
    def piece(path, width):
        if side == 'top':  # the over-brace is the under-brace upside down
            path = re.sub(r'(-?[\d.]+) (-?[\d.]+)', lambda m: f'{m[1]} {10 - float(m[2]):g}', path)
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 10" preserveAspectRatio="none">'
               f'<path d="{path}" fill="none" stroke="{BRACE_COLOUR}" stroke-width="1.2"/></svg>')
        return f'url("data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}")'
    rule = f'linear-gradient({BRACE_COLOUR}, {BRACE_COLOUR})'
    return (f'.{name} {{ padding-{side}: 0.5em; print-color-adjust: exact; -webkit-print-color-adjust: exact;\n'
            f'  background: {piece("M0.6 0 Q0.6 5 6 5 L10 5", 10)} left {side} / 0.5em 0.5em no-repeat,\n'
            f'    {piece("M0 5 L4 5 Q9.4 5 10 10 Q10.6 5 16 5 L20 5", 20)} center {side} / 1em 0.5em no-repeat,\n'
            f'    {piece("M0 5 L4 5 Q9.4 5 9.4 0", 10)} right {side} / 0.5em 0.5em no-repeat,\n'
            f'    {rule} left 0.5em {side} 0.22em / calc(50% - 1em) 0.06em no-repeat,\n'
            f'    {rule} right 0.5em {side} 0.22em / calc(50% - 1em) 0.06em no-repeat; }}\n')


BRACE_COLOUR = 'rgba(0,0,0,0.87)'  # the lab's text colour, which the formulas are set in
SITE_CSS = """
/* Formulas are MathML written by the build, set in the math font shipped in fonts/ (Latin Modern Math) whatever
   the reader's system has: a system math font may be missing, or lack the script shifts and stretchy braces. */
@font-face { font-family: "Companion Math"; src: url("fonts/latinmodern-math.otf") format("opentype"); }
math { font-family: "Companion Math", math; }
.tex-overline { border-top: 0.06em solid; padding-top: 0.12em; }
""" + brace_css('tex-underbrace', 'bottom') + brace_css('tex-overbrace', 'top') + """
.display-formula { display: block; margin: 0.6em 0; padding: 0.15em 0; overflow-x: auto; overflow-y: hidden; }
/* A box that scrolls sideways says so: a shadow at an edge with more beyond it (the white covers, scrolled with the
   content, hide the shadow once that edge is reached), and a scroll bar that stays visible where the browser lets
   a page style it. A formula cut at the screen's edge otherwise looks complete. */
.scroll-hint {
  background: linear-gradient(to right, white 40%, rgba(255,255,255,0)) left center / 1.5em 100% no-repeat local,
    linear-gradient(to left, white 40%, rgba(255,255,255,0)) right center / 1.5em 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,0.45), rgba(0,0,0,0)) left center / 0.9em 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,0.45), rgba(0,0,0,0)) right center / 0.9em 100% no-repeat
    scroll; }
.scroll-hint::-webkit-scrollbar { height: 0.35em; }
.scroll-hint::-webkit-scrollbar-thumb { background: rgba(0,0,0,0.3); border-radius: 0.2em; }
/* Below 760 px the lab's style sheet makes each input and output area a table row, which cannot scroll: what
   passes its edge is hidden by the box around it. As blocks they scroll again. */
@media only screen and (max-width: 760px) {
  .jp-OutputArea-child .jp-OutputArea-output, .jp-InputArea-editor { display: block; }
}
/* Code names in a collapsible section (notebook 12's map) are long and have no spaces: they wrap where they must
   rather than pass the edge of a phone's screen. */
details code { overflow-wrap: anywhere; }
/* An output figure opens full size (a link to its file): ten panels at phone width cannot be read. */
a.figure-full { display: block; }
/* a wide table scrolls inside its box instead of widening the page */
.table-scroll { max-width: 100%; overflow-x: auto; margin-bottom: 1em; }
.table-scroll > table { margin-bottom: 0; }
img { max-width: 100%; height: auto; }
/* Code, printed output and preformatted text keep their lines (a table printed in text stays aligned) and scroll
   sideways inside their box: the lab's cells hide what passes their edge, and its output wraps mid-token. A flex
   item gives its width up to the screen only with min-width 0. */
.jp-InputArea-editor, .jp-OutputArea-output { min-width: 0; }
.jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
  overflow-x: auto; white-space: pre; word-break: normal; overflow-wrap: normal; }
@media print {
  .jp-InputPrompt, .jp-OutputPrompt, .jp-InputArea-prompt, .jp-OutputArea-prompt { display: none; }
  .jp-Notebook { padding: 0; }
  .jp-InputArea, .jp-InputArea-editor, .jp-OutputArea-output { overflow: visible; }
  /* A block of text keeps its lines, so a table printed in text stays aligned: its font is made small enough for
     its longest line (--columns, written by the build; a monospace character is about 0.6 em wide) to fit the
     cell. Wrapping is left only for a browser without container units. */
  .jp-Cell { container-type: inline-size; }
  .jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
    font-size: 85%; white-space: pre-wrap; overflow-wrap: anywhere; overflow: visible; }
  .jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
    font-size: min(11px, calc(100cqi / (var(--columns, 80) * 0.62))); }
  pre, table { break-inside: avoid; }
  /* Collapsed sections print open: the page's print script opens them, and where the browser has the pseudo-element
     for a section's content this shows it even without scripts. */
  details::details-content { content-visibility: visible; display: block; }
  details > summary { font-weight: bold; }
  .scroll-hint { background: none; }
  .jp-RenderedImage, .jp-RenderedSVG, .display-formula, tr { break-inside: avoid; }
  td, th { overflow-wrap: anywhere; }
  h1, h2, h3 { break-after: avoid; }
  .table-scroll, .display-formula { overflow: visible; }
  .display-formula { font-size: 85%; }  /* the widest formulas fit a printed line */
}
"""

# Printing opens every closed <details> (notebook 12's map, what each seed measured), which would otherwise print as
# its summary line alone, and closes them again afterwards. The page's only script; it fetches nothing.
PRINT_SCRIPT = """(function () {
  var opened = [];
  window.addEventListener('beforeprint', function () {
    opened = Array.prototype.slice.call(document.querySelectorAll('details:not([open])'));
    opened.forEach(function (section) { section.open = true; });
  });
  window.addEventListener('afterprint', function () {
    opened.forEach(function (section) { section.open = false; });
    opened = [];
  });
})();"""
