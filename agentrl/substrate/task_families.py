"""The task families of the one-edit gym: correct Python functions with anonymised names, and their test inputs.

Each entry is (what the function computes, its source with the name written F, a draw of one hidden-test input).
The gym (agentrl.substrate.gym) turns every one-token bug of these sources into a task; this file is only data.
"""


def _ints(rng, n, low, high):
    return [rng.randint(low, high) for _ in range(n)]


def _list(rng):
    return _ints(rng, rng.randint(4, 7), -3, 9)


def source_lines(text):
    """The lines of a family's source text, without the blank lines around it."""
    return tuple(line for line in text.strip('\n').split('\n'))


# Each family's source uses only the right-hand operators of FIXES (never <, -, !=, or, //, min, <=, /).
FAMILY_TABLE = [
    ('sum of the even items of a0 greater than a1', '''
def F ( a0 , a1 ) :
    r = 0
    for x in a0 :
        if x % 2 == 0 and x > a1 :
            r = r + x
    return r''', lambda rng: (_list(rng), rng.randint(-2, 5))),
    ('number of items of a0 at least a1 and below a2', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in a0 :
        if x >= a1 and a2 > x :
            c = c + 1
    return c * 3''', lambda rng: (_list(rng), rng.randint(-1, 4), rng.randint(3, 8))),
    ('a1 plus the largest of a1 and twice each item of a0 with remainder 1 modulo 3', '''
def F ( a0 , a1 ) :
    r = a1
    for x in a0 :
        if x % 3 == 1 :
            r = max ( r , x * 2 )
    return r + a1''', lambda rng: (_list(rng), rng.randint(-3, 6))),
    ('twice the running sum of a0 reset to a1 when it passes a1 on a positive item', '''
def F ( a0 , a1 ) :
    r = 0
    for x in a0 :
        r = r + x
        if r > a1 and x >= 1 :
            r = a1
    return r * 2''', lambda rng: (_list(rng), rng.randint(2, 12))),
    ('sum of the first a1 items of a0 taken cyclically', '''
def F ( a0 , a1 ) :
    i = 0
    s = 0
    while a1 > i :
        s = s + a0 [ i % len ( a0 ) ]
        i = i + 1
    return s * 2''', lambda rng: (_list(rng), rng.randint(1, 12))),
    ('number of pairs of items of a0 that sum to a1 counted once', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        for y in a0 :
            if x + y == a1 and x > y :
                c = c + 1
    return c''', lambda rng: (_list(rng), rng.randint(2, 10))),
    ('dot product of a0 and a1 over positions with a0 positive and a1 not negative', '''
def F ( a0 , a1 ) :
    r = 0
    for i in range ( len ( a0 ) ) :
        if a0 [ i ] > 0 and a1 [ i ] >= 0 :
            r = r + a0 [ i ] * a1 [ i ]
    return max ( r , 1 )''', lambda rng: (lambda a: (a, _ints(rng, len(a), -3, 9)))(_list(rng))),
    ('sum of the squares of the positive items of a0 divisible by a1', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        if x % a1 == 0 and x > 0 :
            c = c + x * x
    return c''', lambda rng: (_list(rng), rng.randint(1, 4))),
    ('value at a1 of the polynomial with coefficients a0 but at least twice a1', '''
def F ( a0 , a1 ) :
    r = 0
    for c in a0 :
        r = r * a1 + c
    return max ( r , a1 * 2 )''', lambda rng: (_ints(rng, rng.randint(2, 4), -3, 5), rng.randint(1, 4))),
    ('number of positive items of a0 equal to its maximum plus a1', '''
def F ( a0 , a1 ) :
    m = max ( a0 )
    c = a1
    for x in a0 :
        if x == m and x > 0 :
            c = c + 1
    return c * 2''', lambda rng: (_list(rng), rng.randint(0, 3))),
    ('sum of the squares of the items of a0 at even positions plus a1', '''
def F ( a0 , a1 ) :
    r = a1
    for i in range ( len ( a0 ) ) :
        if i % 2 == 0 :
            r = r + a0 [ i ] * a0 [ i ]
    return max ( r , 0 )''', lambda rng: (_list(rng), rng.randint(-40, 3))),
    ('two points per item of a0 above a1 and one more per item at least a2', '''
def F ( a0 , a1 , a2 ) :
    r = 0
    for x in a0 :
        if x > a1 :
            r = r + 2
        if x >= a2 :
            r = r * 3
    return r''', lambda rng: (_list(rng), rng.randint(0, 5), rng.randint(3, 8))),
    ('largest prefix sum of a0 with every item doubled and a1 added', '''
def F ( a0 , a1 ) :
    s = 0
    r = a1
    for x in a0 :
        s = s + x * 2
        r = max ( r , s + a1 )
    return r''', lambda rng: (_list(rng), rng.randint(-4, 4))),
    ('sum of the absolute values of the odd items of a0 whose absolute value is at least a1', '''
def F ( a0 , a1 ) :
    r = 0
    for x in a0 :
        if abs ( x ) >= a1 and x % 2 == 1 :
            r = r + abs ( x )
    return r''', lambda rng: (_list(rng), rng.randint(0, 5))),
    ('first even position of a0 holding an item above a1 else the length of a0', '''
def F ( a0 , a1 ) :
    for i in range ( len ( a0 ) ) :
        if a0 [ i ] > a1 and i % 2 == 0 :
            return i * 3
    return len ( a0 ) + 1''', lambda rng: (_list(rng), rng.randint(0, 7))),
    ('sum over a0 of the larger of the item and a1 times a2', '''
def F ( a0 , a1 , a2 ) :
    r = 0
    for x in a0 :
        r = r + max ( x , a1 ) * a2
    return r''', lambda rng: (_list(rng), rng.randint(-1, 5), rng.randint(2, 4))),
    ('one plus the number of items of a0 greater than every item before them', '''
def F ( a0 ) :
    c = 0
    m = a0 [ 0 ]
    for x in a0 :
        if x > m :
            c = c + 1
            m = x
    return c * 2''', lambda rng: (_list(rng),)),
    ('product of the items of a0 modulo 7 plus a1', '''
def F ( a0 , a1 ) :
    p = 1
    for x in a0 :
        p = p * x % 7
    return p + a1''', lambda rng: (_ints(rng, rng.randint(3, 6), 1, 9), rng.randint(0, 5))),
    ('smallest k whose square is at least a0 plus a1', '''
def F ( a0 , a1 ) :
    k = 0
    while a0 > k * k :
        k = k + 1
    return k + a1''', lambda rng: (rng.randint(2, 40), rng.randint(0, 3))),
    ('number of items x of a0 with a1 x plus a2 positive and x not negative', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in a0 :
        if a1 * x + a2 > 0 and x >= 0 :
            c = c + 1
    return c''', lambda rng: (_list(rng), rng.randint(-3, 3), rng.randint(-4, 4))),
    ('sum of the squares of the items of a0 above 1 that are also in a1', '''
def F ( a0 , a1 ) :
    r = 0
    for x in a0 :
        if x in a1 and x > 1 :
            r = r + x * x
    return r''', lambda rng: (_list(rng), _list(rng))),
    ('largest item of a0 plus twice its position', '''
def F ( a0 ) :
    r = 0
    for i in range ( len ( a0 ) ) :
        r = max ( r , a0 [ i ] + i * 2 )
    return r''', lambda rng: (_list(rng),)),
    ('two points per item of a0 equal to a1 and one per item above a1', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        if x == a1 :
            c = c + 2
        if x > a1 :
            c = c * 3
    return c''', lambda rng: (_list(rng), rng.randint(0, 6))),
    ('sum of the items of a0 at every third position where a1 is positive', '''
def F ( a0 , a1 ) :
    r = 0
    for i in range ( len ( a1 ) ) :
        if a1 [ i ] > 0 and i % 3 == 0 :
            r = r + a0 [ i ]
    return r''', lambda rng: (lambda a: (a, _ints(rng, len(a), -3, 9)))(_list(rng))),
    ('number of items of a0 divisible by a1 plus two per positive item divisible by a2', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in a0 :
        if x % a1 == 0 :
            c = c + 1
        if x % a2 == 0 and x > 0 :
            c = c + 2
    return c''', lambda rng: (_list(rng), rng.randint(2, 3), rng.randint(4, 5))),
    ('total of a0 scaled by a1 plus one for each item greater than a2', '''
def F ( a0 , a1 , a2 ) :
    t = 0
    for x in a0 :
        t = t + x * a1
        if x > a2 :
            t = t + 1
    return t''', lambda rng: (_list(rng), rng.randint(2, 4), rng.randint(0, 6))),
    ('number of steps that triple a0 and add one until it reaches a1', '''
def F ( a0 , a1 ) :
    n = 0
    while a1 > a0 :
        a0 = a0 * 3 + 1
        n = n + 1
    return n''', lambda rng: (rng.randint(1, 4), rng.randint(5, 200))),
    ('largest square of an item of a0 above the running record then raised by a1', '''
def F ( a0 , a1 ) :
    r = a1
    for x in a0 :
        if x * x > r :
            r = x * x + a1
    return r''', lambda rng: (_list(rng), rng.randint(0, 9))),
    ('whether every item of a0 is even and at least a1', '''
def F ( a0 , a1 ) :
    for x in a0 :
        if not x >= a1 :
            return False
        if not x % 2 == 0 :
            return False
    return True''', lambda rng: (rng.choice([[2 * v for v in _ints(rng, 4, 0, 5)], _list(rng)]), rng.randint(-1, 3))),
    ('twice the sum of the items of a0 from position a1 up to but not including a2', '''
def F ( a0 , a1 , a2 ) :
    r = 0
    for i in range ( len ( a0 ) ) :
        if i >= a1 and a2 > i :
            r = r + a0 [ i ] * 2
    return r''', lambda rng: (_list(rng), rng.randint(0, 3), rng.randint(2, 6))),
    ('number of items of a0 whose square plus a1 reaches a2 but never below one', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in a0 :
        if x * x + a1 >= a2 :
            c = c + 1
    return max ( c , 1 )''', lambda rng: (_list(rng), rng.randint(-3, 3), rng.randint(5, 40))),
    ('maximum of a0 plus the largest positive item different from it', '''
def F ( a0 ) :
    m = max ( a0 )
    r = 0
    for x in a0 :
        if x > r and not x == m :
            r = x
    return m + r''', lambda rng: (_list(rng),)),
    ('twice the sum of the items of a0 above a1 plus three for each item equal to a2', '''
def F ( a0 , a1 , a2 ) :
    r = 0
    for x in a0 :
        if x > a1 :
            r = r + x
        if x == a2 :
            r = r + 3
    return r * 2''', lambda rng: (_list(rng), rng.randint(0, 5), rng.randint(0, 6))),
    ('product of the odd items of a0 that exceed a1 counted twice', '''
def F ( a0 , a1 ) :
    p = 1
    for x in a0 :
        if x > a1 and x % 2 == 1 :
            p = p * x
    return p + p''', lambda rng: (_list(rng), rng.randint(-2, 4))),
    ('one more than the largest item at an odd position of a0 multiplied by a1', '''
def F ( a0 , a1 ) :
    r = 0
    for i in range ( len ( a0 ) ) :
        if i % 2 == 1 :
            r = max ( r , a0 [ i ] * a1 )
    return r + 1''', lambda rng: (_list(rng), rng.randint(1, 4))),
    ('number of adjacent pairs of a0 whose sum exceeds a1 with the later item not negative', '''
def F ( a0 , a1 ) :
    c = 0
    p = a0 [ 0 ]
    for x in a0 :
        if x + p > a1 and x >= 0 :
            c = c + 1
        p = x
    return c''', lambda rng: (_list(rng), rng.randint(0, 10))),
]


# Fifteen more families, in the same form and under the same rule (only right-hand operators of FIXES), for the
# 'extended' family set: FAMILY_TABLE followed by these, named f36..f50.
EXTRA_FAMILY_TABLE = [
    ('twice the length of the longest run of items of a0 at least a1 plus a1', '''
def F ( a0 , a1 ) :
    r = 0
    n = 0
    for x in a0 :
        if x >= a1 :
            n = n + 1
        else :
            n = 0
        r = max ( r , n * 2 )
    return r + a1''', lambda rng: (_list(rng), rng.randint(-1, 4))),
    ('twice the number of items of a0 greater than the item before them and the item after them', '''
def F ( a0 ) :
    c = 0
    p = a0 [ 0 ]
    y = a0 [ 0 ]
    for x in a0 :
        if y > p and y > x :
            c = c + 1
        p = y
        y = x
    return c * 2''', lambda rng: (_list(rng),)),
    ('three times the greatest common divisor of a0 and a1 plus its number of steps', '''
def F ( a0 , a1 ) :
    n = 0
    while a1 > 0 :
        t = a0 % a1
        a0 = a1
        a1 = t
        n = n + 1
    return a0 * 3 + n''', lambda rng: (rng.randint(2, 40), rng.randint(1, 30))),
    ('twice the number of pairs of items of a0 where the earlier exceeds the later by more than a1', '''
def F ( a0 , a1 ) :
    c = 0
    for i in range ( len ( a0 ) ) :
        for k in range ( i + 1 , len ( a0 ) ) :
            if a0 [ i ] > a0 [ k ] + a1 :
                c = c + 1
    return c * 2''', lambda rng: (_list(rng), rng.randint(0, 3))),
    ('twice the number of prefix sums of a0 above a1 plus the sum of a0', '''
def F ( a0 , a1 ) :
    s = 0
    c = 0
    for x in a0 :
        s = s + x
        if s > a1 :
            c = c + 1
    return c * 2 + s''', lambda rng: (_list(rng), rng.randint(0, 12))),
    ('twice the sum of the different items of a0 above a1', '''
def F ( a0 , a1 ) :
    s = [ ]
    c = 0
    for x in a0 :
        if x > a1 and not x in s :
            s = s + [ x ]
            c = c + x
    return c * 2''', lambda rng: (_ints(rng, rng.randint(5, 8), -1, 5), rng.randint(-1, 2))),
    ('twice the sum of a0 with the items at odd positions multiplied by a1', '''
def F ( a0 , a1 ) :
    r = 0
    for i in range ( len ( a0 ) ) :
        if i % 2 == 1 :
            r = r + a0 [ i ] * a1
        else :
            r = r + a0 [ i ]
    return r * 2''', lambda rng: (_list(rng), rng.randint(2, 4))),
    ('two points per item of a0 above a1 whose square is also in a0 plus a1', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        if x * x in a0 and x > a1 :
            c = c + 2
    return c + a1''', lambda rng: (_ints(rng, rng.randint(5, 8), -2, 9), rng.randint(-2, 2))),
    ('twice the largest sum of an item of a0 and an earlier item but at least a1', '''
def F ( a0 , a1 ) :
    m = a0 [ 0 ]
    r = a1
    for x in a0 [ 1 : ] :
        if x + m > r :
            r = x + m
        m = max ( m , x )
    return r * 2''', lambda rng: (_list(rng), rng.randint(0, 8))),
    ('twice the sum of the positive items x of a0 with a1 divisible by x', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        if x > 0 and a1 % x == 0 :
            c = c + x
    return c * 2''', lambda rng: (_list(rng), rng.randint(4, 24))),
    ('twice the number of items of a0 whose product with the length of a0 exceeds the sum of a0 plus a1', '''
def F ( a0 , a1 ) :
    s = 0
    for x in a0 :
        s = s + x
    c = 0
    for x in a0 :
        if x * len ( a0 ) > s + a1 :
            c = c + 1
    return c * 2''', lambda rng: (_list(rng), rng.randint(-3, 6))),
    ('twice the sum of the items of a0 before the first even item above a1', '''
def F ( a0 , a1 ) :
    c = 0
    for x in a0 :
        if x > a1 and x % 2 == 0 :
            break
        c = c + x
    return c * 2''', lambda rng: (_list(rng), rng.randint(0, 6))),
    ('a1 plus the largest of 0 and the even items of a0 not above a1', '''
def F ( a0 , a1 ) :
    r = 0
    for x in a0 :
        if a1 >= x and x % 2 == 0 :
            r = max ( r , x )
    return r + a1''', lambda rng: (_list(rng), rng.randint(0, 8))),
    ('twice the number of items of a0 whose remainder modulo a2 is that of a1', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in a0 :
        if x % a2 == a1 % a2 :
            c = c + 1
    return c * 2''', lambda rng: (_list(rng), rng.randint(0, 9), rng.randint(2, 4))),
    ('twice the number of x below a0 whose square modulo a1 is a2', '''
def F ( a0 , a1 , a2 ) :
    c = 0
    for x in range ( a0 ) :
        if x * x % a1 == a2 :
            c = c + 1
    return c * 2''', lambda rng: (rng.randint(3, 12), rng.randint(3, 7), rng.randint(0, 4))),
]
