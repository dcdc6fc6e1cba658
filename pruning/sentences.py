"""Sentences written for this project (not taken from any dataset) for the one-shot pruning study
and the ``hwcosim prune --calibration`` examples.

``CALIBRATION`` feeds the activations that Wanda/OBS prune from; ``SCORING`` is disjoint from it
and is only used to compare dense and pruned sentence embeddings. ``SCORING`` comes in six topics
of six sentences each (close paraphrases, same-topic sentences and off-topic ones), so that the
pairwise similarities span a wide range and their rank correlation means something.
"""

CALIBRATION = [
    "The train to the coast leaves every hour from the second platform.",
    "She planted tomatoes and basil along the sunny side of the garden.",
    "Our quarterly report shows revenue growing faster than costs.",
    "The museum opens a new exhibition of early photography next week.",
    "He forgot his umbrella and arrived at the meeting soaked.",
    "Volcanic ash can ground flights across an entire continent.",
    "The recipe calls for two eggs, a cup of flour and a pinch of salt.",
    "Children learn languages more easily when they hear them every day.",
    "The bridge was closed for repairs after the winter storms.",
    "A good night's sleep improves memory and concentration.",
    "The orchestra tuned their instruments before the concert began.",
    "Engineers replaced the old copper cables with optical fibre.",
    "Prices of fresh vegetables rose sharply after the drought.",
    "The hikers reached the summit just before the clouds rolled in.",
    "Please send me the signed contract by Friday afternoon.",
    "Bees carry pollen from flower to flower while collecting nectar.",
    "The court ruled that the new law was unconstitutional.",
    "A compiler translates source code into machine instructions.",
    "The library extended its opening hours during the exam period.",
    "Heavy traffic delayed the delivery of the new furniture.",
    "Whales communicate with songs that travel for many kilometres.",
    "The startup raised money to expand into three new markets.",
    "Regular exercise lowers the risk of heart disease.",
    "The detective noticed a small scratch on the window frame.",
    "Solar panels on the roof now cover most of the house's electricity.",
    "The referee stopped the match because of the thunderstorm.",
    "Ancient traders crossed the desert with caravans of camels.",
    "The printer on the third floor has run out of paper again.",
    "Glaciers in the Alps have been shrinking for decades.",
    "My grandmother tells stories about the village where she grew up.",
    "The hospital hired more nurses for the night shift.",
    "A sudden power cut left the whole neighbourhood in darkness.",
    "The team celebrated after winning the regional championship.",
    "Fresh bread smells wonderful early in the morning.",
    "The satellite sends images of the weather back to Earth.",
    "Students argued about the meaning of the poem's last line.",
    "The ferry was cancelled because the sea was too rough.",
    "He repaired the bicycle chain with a borrowed tool.",
    "Interest rates influence how much people borrow to buy homes.",
    "The painter mixed blue and yellow to get a bright green.",
    "Our flight was delayed by two hours due to fog.",
    "The software update fixed a bug that crashed the application.",
    "Farmers harvest the grapes in early autumn.",
    "The city council voted to build a new public swimming pool.",
    "Owls hunt at night and sleep during the day.",
    "She practised the piano for an hour every evening.",
    "The chemist measured the temperature of the reaction carefully.",
    "Tourists queued for hours to see the famous painting.",
]

SCORING = [
    # cooking
    "I baked a chocolate cake for my sister's birthday.",
    "For her birthday I made my sister a chocolate cake.",
    "The soup needs more salt and a little pepper.",
    "We grilled fish and vegetables on the barbecue.",
    "Knead the dough until it becomes smooth and elastic.",
    "He burned the rice because he forgot it on the stove.",
    # computers
    "The laptop will not start after the latest update.",
    "My computer fails to boot since I installed the new update.",
    "Back up your files before you reinstall the operating system.",
    "The program runs much faster on the new graphics card.",
    "A memory leak slowly made the server unresponsive.",
    "She wrote a script to rename thousands of photos at once.",
    # weather
    "It has been raining all week and the river is rising.",
    "The river keeps rising after a whole week of rain.",
    "Tomorrow will be sunny with a light breeze from the west.",
    "Snow blocked the mountain roads overnight.",
    "A heat wave is expected to last until the weekend.",
    "Strong winds knocked down several trees in the park.",
    # sport
    "The striker scored twice in the second half.",
    "In the second half the forward scored two goals.",
    "The marathon runners passed the halfway point in the rain.",
    "Our basketball team lost by a single point.",
    "The tennis final lasted more than four hours.",
    "She broke the national record in the long jump.",
    # health
    "The doctor told him to drink more water and rest.",
    "He was advised by his physician to rest and stay hydrated.",
    "Vaccines train the immune system to recognise a virus.",
    "Eating too much sugar can damage your teeth.",
    "The clinic offers free blood pressure checks on Mondays.",
    "Walking thirty minutes a day helps keep the heart healthy.",
    # travel
    "We missed our connecting flight in Frankfurt.",
    "Our connection in Frankfurt left before we landed.",
    "The hotel room had a beautiful view of the harbour.",
    "Remember to bring your passport and a travel adapter.",
    "The night bus to the capital was cheap but uncomfortable.",
    "They rented a small car to explore the islands.",
]
