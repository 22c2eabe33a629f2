"""The site's formulas: TeX typeset as MathML by the pinned latex2mathml and tidied to be set as TeX sets it,
Markdown rendered as nbconvert renders a cell with every formula typeset, a check that no TeX is left untypeset in a
page, and a formula written out as plain text for a figure's alternative text."""
import re
import xml.etree.ElementTree as ET


class FormulaError(ValueError):
    """A formula the build cannot typeset, or TeX left untypeset in a page; the message says where it stands."""


FUNCTION_NAMES = frozenset({'arg', 'cos', 'det', 'dim', 'exp', 'inf', 'lim', 'ln', 'log', 'max', 'min', 'sin',
                            'sup', 'tan'})
LIMITS_BELOW = frozenset('∑∏⋃⋂')  # large operators whose limits TeX sets below and above in a display
CLOSING = frozenset(')]}⌋⌉⟩')
ORDINARY = frozenset('∇∂∞′')  # written as <mo> but set by TeX as ordinary symbols
OVERLINES = frozenset('―‾\u0305')  # what latex2mathml (and others) put over \overline{...}
BRACES = {('munder', '⏟'): 'tex-underbrace', ('mover', '⏞'): 'tex-overbrace'}  # \underbrace, \overbrace
SCRIPTED = frozenset({'msub', 'msup', 'msubsup', 'munder', 'mover', 'munderover'})
SIGNS = frozenset('−+±∓')  # binary after an operand, a sign anywhere else (TeX: a Bin after a Rel is an Ord)
AS_OPERATOR = {'~': '∼', '±': '±', '∓': '∓', '⌊': '⌊', '⌋': '⌋', '⌈': '⌈', '⌉': '⌉'}  # latex2mathml writes as <mi>
ROWS = frozenset({'math', 'mrow', 'mstyle', 'msqrt', 'mtd', 'mpadded', 'mphantom'})  # elements holding a sequence
ARITY = {'mfrac': 2, 'msub': 2, 'msup': 2, 'munder': 2, 'mover': 2, 'mroot': 2, 'msubsup': 3, 'munderover': 3}
THIN_SPACE = '0.167em'  # TeX's \, (what latex2mathml writes for it too)


def check_braces(tex):
    """Raise FormulaError unless every '{' of tex is closed by a '}' (escaped \\{ and \\} are not groups)."""
    depth = 0
    for token in re.findall(r'\\.|[{}]', tex, flags=re.S):
        depth += {'{': 1, '}': -1}.get(token, 0)
        if depth < 0:
            raise FormulaError('a "}" closes no group')
    if depth:
        raise FormulaError(f'{depth} "{{" never closed')


def typeset(tex, display=False):
    """MathML for one formula (TeX without its delimiters) -> str, or FormulaError saying why it cannot be typeset.

    latex2mathml passes an unknown command through as text and accepts a missing argument; both are errors here.
    Its output is then tidied to read as TeX sets it (see tidy_mathml).
    """
    from latex2mathml.converter import convert
    if not tex.strip():
        raise FormulaError('empty formula')
    check_braces(tex)
    try:
        mathml = convert(tex, display='block' if display else 'inline')
    except Exception as error:  # latex2mathml raises its own exception per kind of mistake
        raise FormulaError(f'latex2mathml cannot parse it ({type(error).__name__}{": " if str(error) else ""}'
                           f'{error})') from None
    try:
        root = ET.fromstring(mathml)
    except ET.ParseError:  # latex2mathml writes a bare '&' for an alignment it does not understand
        raise FormulaError('alignment (&) outside a matrix, or a construction latex2mathml writes as broken '
                           'MathML') from None
    for element in root.iter():
        element.tag = element.tag.rpartition('}')[2]  # plain <math> in HTML: no namespace URL in the page
        text = element.text or ''
        if '\\' in text:
            raise FormulaError(f'unknown command {text.strip()}')
        if element.tag == 'merror' or (element.tag in ('mi', 'mo') and text == '&'):
            raise FormulaError('alignment (&) or an environment MathML cannot show here')
        if element.get('linebreak'):
            raise FormulaError('a line break (\\\\) inside a formula')
        if element.tag in ARITY and len(element) != ARITY[element.tag]:
            raise FormulaError(f'a fraction, root or script with a missing argument (<{element.tag}>)')
    tidy_mathml(root)
    return ET.tostring(root, encoding='unicode')


def _is_function(element):
    """True for \\log, \\exp, ... (alone or with a script): TeX spaces them as operators."""
    if element.tag in ('msub', 'msup', 'msubsup', 'munder'):
        element = element[0]
    return element.tag == 'mi' and element.text in FUNCTION_NAMES


def tidy_mathml(root):
    """Mend what latex2mathml writes so that the browser sets it as TeX does, in place.

    \\sim, \\pm, \\lfloor... become operators (latex2mathml writes identifiers: '~' for \\sim); a star in a script
    is the asterisk operator; a large operator's limits go below and above even inside a group; the letters of
    \\mathrm{KL} become one identifier; \\log and its kin get TeX's thin spaces; \\binom's parentheses stretch to
    its fraction instead of a fixed 2 em; \\overline is a rule over its argument, \\underbrace and \\overbrace a
    brace drawn under or over it; operators in scripts, |, \\infty and \\nabla take no space of their own.
    """
    for element in list(root.iter()):
        if element.tag == 'mi' and element.text in AS_OPERATOR:
            element.tag, element.text = 'mo', AS_OPERATOR[element.text]
            element.set('stretchy', 'false')  # \lfloor is not \left\lfloor
        elif element.tag == 'mo' and element.text == '*':
            element.text = '∗'
        elif element.tag == 'mo' and (element.text in ('|', '‖') or element.text in ORDINARY):
            element.set('lspace', '0')  # ordinary symbols in TeX: |x|, \|, \infty, \nabla take no space of their own
            element.set('rspace', '0')
    for element in list(root.iter()):
        if (element.tag in ('msub', 'msup', 'msubsup') and element[0].tag == 'mo'
                and element[0].text in LIMITS_BELOW):
            element.tag = {'msub': 'munder', 'msup': 'mover', 'msubsup': 'munderover'}[element.tag]
        if element.tag == 'mover' and element[1].tag == 'mo' and element[1].text in OVERLINES:
            # a rule drawn by CSS: a stretched overline glyph exists in some math fonts and not in others
            element.remove(element[1])
            element.tag, element.attrib = 'mrow', {'class': 'tex-overline'}
        braced = BRACES.get((element.tag, element[1].text if len(element) > 1 else None))
        if braced and element[1].tag == 'mo':
            # drawn by CSS on the term itself, so it spans the term: Chromium paints a brace stretched from glyph
            # pieces only where the unstretched glyph would be, and drops the rest of it on screen
            element.remove(element[1])
            element.tag, element.attrib = 'mrow', {'class': braced}
        if element.tag in SCRIPTED:  # TeX sets no space around operators in a script: k_{1,s}, y \sim \pi
            for script in element[1:]:
                for operator in script.iter('mo'):
                    operator.set('lspace', '0')
                    operator.set('rspace', '0')
    for row in [element for element in root.iter() if element.tag in ROWS]:
        children = list(row)
        merged = []
        for child in children:
            upright = child.tag == 'mi' and child.get('mathvariant') == 'normal' and len(child) == 0
            if upright and merged and merged[-1].tag == 'mi' and merged[-1].get('mathvariant') == 'normal':
                merged[-1].text += child.text
                continue
            merged.append(child)
        spaced = []
        for i, child in enumerate(merged):
            if child.tag == 'mi' and child.get('mathvariant') == 'normal' and len(child.text or '') > 1:
                del child.attrib['mathvariant']  # a name of several letters is upright by default
            before = next((m for m in reversed(merged[:i]) if m.tag != 'mspace'), None)
            after = merged[i + 1] if i + 1 < len(merged) else None
            operand_before = before is not None and (
                before.tag != 'mo' or before.text in CLOSING or before.text in ORDINARY)
            if child.tag == 'mo' and child.text in SIGNS and not operand_before:
                child.set('form', 'prefix')  # '= -x': a sign, not a binary minus with space around it
            if child.tag == 'mo' and child.text == '/':
                child.set('lspace', '0')  # TeX's slash is an ordinary symbol: 'r/β', not 'r / β'
                child.set('rspace', '0')
            function = _is_function(child)
            if function and operand_before and spaced and spaced[-1].tag != 'mspace':
                spaced.append(ET.Element('mspace', width=THIN_SPACE))
            spaced.append(child)
            if function and after is not None and after.tag != 'mspace' and (
                    after.tag != 'mo' or after.text in ORDINARY):
                spaced.append(ET.Element('mspace', width=THIN_SPACE))
        for i, child in enumerate(spaced):
            if (child.tag == 'mfrac' and child.get('linethickness') == '0' and 0 < i < len(spaced) - 1
                    and spaced[i - 1].tag == spaced[i + 1].tag == 'mo'):
                for paren in (spaced[i - 1], spaced[i + 1]):
                    paren.attrib.pop('minsize', None)
                    paren.attrib.pop('maxsize', None)
                    paren.set('stretchy', 'true')
        row[:] = spaced


# what a figure's alternative text writes for the operators of a formula (the rest of its symbols are as shown)
SPACED_OPERATORS = frozenset('=+−-<>≈≤≥∼→←∝×·≠∈∣')
SUBSCRIPTS = dict(zip('0123456789+−=()aehijklmnoprstuvx', '₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ'))
SUPERSCRIPTS = dict(zip('0123456789+−=()in∗*', '⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿ**'))


def math_text(element):
    """A formula's MathML as one line of plain text, for an image's alternative text: 'π_ref = [0.05, 0.45]'."""
    tag, text = element.tag, (element.text or '').replace('\xa0', ' ')
    if tag in ('mi', 'mn', 'mtext'):
        return text
    if tag == 'mo':
        return f' {text} ' if text in SPACED_OPERATORS else (', ' if text == ',' else text)
    if tag == 'mspace':
        return ' ' if element.get('width') not in (None, THIN_SPACE) else ''
    parts = [math_text(child) for child in element]

    def script(part, table, mark):
        part = part.strip()
        if all(ch in table for ch in part):
            return ''.join(table[ch] for ch in part)
        return f'{mark}{part}' if len(part) == 1 else f'{mark}({part})' if mark == '^' else f'{mark}{part}'
    if tag in ('msub', 'munder') and element[1].tag != 'mo':
        return parts[0] + script(parts[1], SUBSCRIPTS, '_')
    if tag in ('msup', 'mover') and element[1].tag != 'mo':
        return parts[0] + script(parts[1], SUPERSCRIPTS, '^')
    if tag in ('mover', 'munder'):  # an accent or a brace: the base alone
        return parts[0]
    if tag in ('msubsup', 'munderover'):
        return parts[0] + script(parts[1], SUBSCRIPTS, '_') + script(parts[2], SUPERSCRIPTS, '^')
    if tag == 'mfrac':
        return '/'.join(f'({part.strip()})' if re.search(r'[\s/]', part.strip()) else part.strip() for part in parts)
    if tag == 'msqrt':
        return f'√({"".join(parts).strip()})'
    return ''.join(parts)


def plain_text(fragment):
    """The text of an HTML fragment, formulas written out by math_text, white space collapsed."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(fragment, 'html.parser')
    for formula in soup.find_all('math'):
        formula.replace_with(math_text(ET.fromstring(str(formula))))
    return ' '.join(soup.get_text().split())


def _renderer_class():
    """IPythonRenderer (nbconvert's Markdown renderer) with every formula typeset as MathML and counted."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    class MathMLRenderer(IPythonRenderer):
        def __init__(self, where, formulas, **options):
            super().__init__(escape=False, **options)
            self.where, self.formulas = where, formulas

        def _typeset(self, tex, display, shown):
            try:
                mathml = typeset(tex, display)
            except FormulaError as error:
                raise FormulaError(f'{self.where}: cannot typeset {shown}: {error}') from None
            self.formulas.append(tex)
            return f'<span class="display-formula scroll-hint">{mathml}</span>' if display else mathml

        def inline_math(self, body):
            return self._typeset(body, False, f'${body}$')

        def block_math(self, body):
            return self._typeset(body, True, f'$${body}$$')

        def latex_environment(self, name, body):
            tex = f'\\begin{{{name}}}{body}\\end{{{name}}}'
            return self._typeset(tex, True, tex)
    return MathMLRenderer


TEX_LEFT = re.compile(r'\$|\\\(|\\\[|\\(?:frac|mathrm|mathbb|text|pi|beta|sum|log)\b')


def check_typeset(page_html, where):
    """Raise FormulaError if the text of rendered Markdown still holds TeX: a formula inside raw HTML, which the
    Markdown parser leaves alone, or a lone dollar sign (write a literal one as &#36;)."""
    text = re.sub(r'<(code|pre|math|script|style)\b.*?</\1>', ' ', page_html, flags=re.S | re.I)
    text = re.sub(r'<[^>]*>', ' ', text)
    match = TEX_LEFT.search(text)
    if match:
        context = ' '.join(text[max(0, match.start() - 60):match.end() + 60].split())
        raise FormulaError(f'{where}: TeX left untypeset in "{context}" (a formula inside raw HTML is not '
                           'converted: write it in Markdown; a literal dollar sign is written &#36;)')


def render_markdown(source, where, formulas, **options):
    """Markdown -> HTML as nbconvert renders a cell, every formula typeset (its TeX appended to `formulas`)."""
    from nbconvert.filters.markdown_mistune import MarkdownWithMath
    rendered = MarkdownWithMath(renderer=_renderer_class()(where, formulas, **options)).render(source)
    check_typeset(rendered, where)
    return rendered


def render_inline(source, where, formulas):
    """One line of Markdown -> HTML without the paragraph around it (for a table cell)."""
    rendered = render_markdown(source, where, formulas).strip()
    if rendered.startswith('<p>') and rendered.endswith('</p>'):
        rendered = rendered[len('<p>'):-len('</p>')]
    return rendered
